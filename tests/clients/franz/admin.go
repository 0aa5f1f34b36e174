package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func str(s string) *string { return &s }

// adminScenario: what AdminScenario.java does, through kadm: topics, configs, records, group offsets.
func (m *matrix) adminScenario() (obs, error) {
	c, cancel := ctx()
	defer cancel()
	out := obs{}
	topic := m.name("adm-topic")
	created, err := m.admin.CreateTopic(c, 2, 1, map[string]*string{"cleanup.policy": str("compact"), "retention.ms": str("3600000")}, topic)
	out["create"] = outcome(firstErr(err, created.Err))
	again, err := m.admin.CreateTopic(c, 2, 1, nil, topic)
	out["create_again"] = outcome(firstErr(err, again.Err))
	bad, err := m.admin.CreateTopic(c, 1, 1, nil, "bad/name")
	out["create_bad_name"] = outcome(firstErr(err, bad.Err))
	settle(func() bool {
		d, err := m.admin.ListTopics(c, topic)
		return err == nil && len(d[topic].Partitions) == 2
	})
	details, err := m.admin.ListTopics(c, topic)
	must(err)
	out["describe_partitions"] = len(details[topic].Partitions)
	out["describe_internal"] = details[topic].IsInternal
	unknown, err := m.admin.ListTopics(c, m.name("no-such-topic"))
	out["describe_unknown"] = outcome(firstErr(err, unknown[m.name("no-such-topic")].Err))

	alter := func(configs ...kadm.AlterConfig) string {
		resps, err := m.admin.AlterTopicConfigs(c, configs, topic)
		if err != nil {
			return outcome(err)
		}
		for _, r := range resps {
			if r.Err != nil {
				return outcome(r.Err)
			}
		}
		return "ok"
	}
	out["alter_configs"] = alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: str("7200000")},
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "max.message.bytes", Value: str("200000")},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "cleanup.policy"})
	settle(func() bool {
		rc, err := m.admin.DescribeTopicConfigs(c, topic)
		if err != nil || len(rc) == 0 {
			return false
		}
		for _, cfg := range rc[0].Configs {
			if cfg.Key == "retention.ms" {
				return cfg.MaybeValue() == "7200000"
			}
		}
		return false
	})
	configs, err := m.admin.DescribeTopicConfigs(c, topic)
	must(err)
	described := map[string]any{}
	for _, rc := range configs {
		for _, cfg := range rc.Configs {
			switch cfg.Key {
			case "retention.ms", "max.message.bytes", "cleanup.policy", "segment.bytes":
				described[cfg.Key] = []any{cfg.MaybeValue(), cfg.Source.String()}
			}
		}
	}
	out["described_configs"] = described
	out["alter_bad_value"] = alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: str("soon")})
	out["alter_unknown_name"] = alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "no.such.config", Value: str("1")})
	grow := func(n int) string {
		resps, err := m.admin.UpdatePartitions(c, n, topic)
		return outcome(firstErr(err, resps.Error()))
	}
	out["create_partitions"] = grow(3)
	out["create_partitions_fewer"] = grow(2)

	// records with timestamps of their own, as in the Java scenario: offsets 7 and 20 carry the largest
	m.createTopics(1, "adm-data")
	data := m.name("adm-data")
	base := time.Now().Add(-time.Hour).UnixMilli()
	producer := m.client(kgo.DefaultProduceTopic(data))
	var records []*kgo.Record
	for i := 0; i < 30; i++ {
		ts := base + 10*int64(i)
		if i == 7 || i == 20 {
			ts = base + 10_000
		}
		records = append(records, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("d-%d", i)),
			Timestamp: time.UnixMilli(ts)})
	}
	must(producer.ProduceSync(c, records...).FirstErr())
	producer.Close()
	out["offsets_before_delete"] = m.listOffsets(data, base)
	var del kadm.Offsets
	del.AddOffset(data, 0, 12, -1)
	deleted, err := m.admin.DeleteRecords(c, del)
	must(err)
	for _, r := range deleted.Sorted() {
		out["delete_records_low_watermark"] = r.LowWatermark
	}
	out["offsets_after_delete"] = m.listOffsets(data, base)
	var beyond kadm.Offsets
	beyond.AddOffset(data, 0, 99, -1)
	beyondResp, err := m.admin.DeleteRecords(c, beyond)
	out["delete_records_beyond_end"] = outcome(firstErr(err, beyondResp.Error()))
	out["read_after_delete"] = len(m.readAll(data, false, 18))

	group := m.name("adm-group")
	var commit kadm.Offsets
	commit.Add(kadm.Offset{Topic: data, Partition: 0, At: 20, LeaderEpoch: -1, Metadata: "meta"})
	committed, err := m.admin.CommitOffsets(c, group, commit)
	out["alter_group_offsets"] = outcome(firstErr(err, committed.Error()))
	fetched, err := m.admin.FetchOffsets(c, group)
	must(err)
	if o, ok := fetched.Lookup(data, 0); ok {
		out["group_offsets"] = []any{o.At, o.Metadata}
	}
	listed, err := m.admin.ListGroups(c)
	must(err)
	var groups []string
	for _, g := range listed.Sorted() {
		if strings.HasPrefix(g.Group, m.run+"-adm") {
			groups = append(groups, fmt.Sprintf("%s:%s:%s", m.strip(g.Group), g.State, g.ProtocolType))
		}
	}
	sort.Strings(groups)
	out["listed_groups"] = groups
	dg, err := m.admin.DescribeGroups(c, group)
	must(err)
	out["described_group"] = []any{dg[group].State, dg[group].ProtocolType, len(dg[group].Members), dg[group].Protocol}
	ts := make(kadm.TopicsSet)
	ts.Add(data, 0)
	deletedOffsets, err := m.admin.DeleteOffsets(c, group, ts)
	out["delete_group_offsets"] = outcome(firstErr(err, deletedOffsets.Error()))
	after, err := m.admin.FetchOffsets(c, group)
	must(err)
	n := 0
	after.Each(func(o kadm.OffsetResponse) {
		if o.At >= 0 {
			n++
		}
	})
	out["group_offsets_after_delete"] = n
	dgr, err := m.admin.DeleteGroup(c, group)
	out["delete_group"] = outcome(firstErr(err, dgr.Err))
	dgr, err = m.admin.DeleteGroup(c, group)
	out["delete_group_again"] = outcome(firstErr(err, dgr.Err))

	dt, err := m.admin.DeleteTopic(c, topic)
	out["delete_topic"] = outcome(firstErr(err, dt.Err))
	dt, err = m.admin.DeleteTopic(c, topic)
	out["delete_topic_again"] = outcome(firstErr(err, dt.Err))
	return out, nil
}

// settle waits (10 s at most) until a change shows: Kafka answers CreateTopics and IncrementalAlterConfigs
// once its controller has taken them and its broker's view follows a moment later, kbroker's at once.
func settle(holds func() bool) {
	deadline := time.Now().Add(10 * time.Second)
	for !holds() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func (m *matrix) listOffsets(topic string, base int64) map[string]int64 {
	c, cancel := ctx()
	defer cancel()
	out := map[string]int64{}
	get := func(name string, l kadm.ListedOffsets, err error) {
		must(err)
		l.Each(func(o kadm.ListedOffset) { out[name] = o.Offset })
	}
	l, err := m.admin.ListStartOffsets(c, topic)
	get("earliest", l, err)
	l, err = m.admin.ListEndOffsets(c, topic)
	get("latest", l, err)
	l, err = m.admin.ListMaxTimestampOffsets(c, topic)
	get("max_timestamp", l, err)
	l, err = m.admin.ListOffsetsAfterMilli(c, base+55, topic)
	get("for_timestamp_base+55", l, err)
	l, err = m.admin.ListOffsetsAfterMilli(c, base+5_000, topic)
	get("for_timestamp_base+5000", l, err)
	l, err = m.admin.ListOffsetsAfterMilli(c, base+20_000, topic)
	get("for_timestamp_after_all", l, err)
	return out
}
