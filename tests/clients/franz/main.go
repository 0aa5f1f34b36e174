// franz-go (kgo, kadm) for the client matrix (tests/reference/test_client_matrix.py): the scenarios of
// tests/clients/java/Matrix.java as franz-go runs them, against one broker, one JSON line per scenario:
//
//	franz-client matrix BOOTSTRAP RUN_PREFIX SCENARIO...
//	franz-client failover BOOTSTRAP TOPIC GROUP   (failover.go)
//	franz-client share BOOTSTRAP TOPIC GROUP MEMBERS RECORDS TIMEOUT_MS   (share.go)
//
// Scenarios: producer-idempotent, producer-transactional, classic-{range,roundrobin,sticky,cooperative-sticky},
// consumer-{uniform,range} (KIP-848, kgo.ServerSideBalancer), regex-classic, admin.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

type obs map[string]any

type matrix struct {
	bootstrap string
	run       string
	admin     *kadm.Client
	raw       *kgo.Client
}

const wait = 60 * time.Second

func main() {
	if len(os.Args) == 5 && os.Args[1] == "failover" {
		failover(os.Args[2], os.Args[3], os.Args[4])
		return
	}
	if len(os.Args) == 8 && os.Args[1] == "share" {
		share(os.Args[2:])
		return
	}
	if len(os.Args) < 5 || os.Args[1] != "matrix" {
		fmt.Fprintln(os.Stderr, "usage: franz-client matrix BOOTSTRAP RUN_PREFIX SCENARIO...")
		os.Exit(2)
	}
	raw, err := kgo.NewClient(kgo.SeedBrokers(os.Args[2]), kgo.ClientID(os.Args[3]+"-admin"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	m := &matrix{bootstrap: os.Args[2], run: os.Args[3], admin: kadm.NewClient(raw), raw: raw}
	enc := json.NewEncoder(os.Stdout)
	for _, name := range os.Args[4:] {
		line := map[string]any{"scenario": name}
		observed, err := m.scenario(name)
		if err != nil {
			line["error"] = err.Error()
		} else {
			line["observed"] = observed
		}
		_ = enc.Encode(line)
	}
	raw.Close()
}

func (m *matrix) scenario(name string) (out obs, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	switch {
	case name == "producer-idempotent":
		return m.idempotent()
	case name == "producer-transactional":
		return m.transactional()
	case name == "regex-classic":
		return m.regexClassic()
	case name == "admin":
		return m.adminScenario()
	case strings.HasPrefix(name, "classic-"):
		return m.group("classic", strings.TrimPrefix(name, "classic-"))
	case strings.HasPrefix(name, "consumer-"):
		return m.group("consumer", strings.TrimPrefix(name, "consumer-"))
	}
	return nil, fmt.Errorf("unknown scenario %q", name)
}

// --- names and helpers ---------------------------------------------------------------------------------

func (m *matrix) name(short string) string { return m.run + "-" + short }

func (m *matrix) strip(full string) string { return strings.TrimPrefix(full, m.run+"-") }

func (m *matrix) tp(topic string, partition int32) string {
	return fmt.Sprintf("%s-%d", m.strip(topic), partition)
}

func ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// outcome is "ok" or the Kafka error's name (kerr), as a client's caller sees it.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func (m *matrix) createTopics(partitions int32, shorts ...string) {
	c, cancel := ctx()
	defer cancel()
	names := make([]string, len(shorts))
	for i, s := range shorts {
		names[i] = m.name(s)
	}
	resps, err := m.admin.CreateTopics(c, partitions, 1, nil, names...)
	must(err)
	must(resps.Error())
}

func (m *matrix) client(opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(m.bootstrap)}, opts...)...)
	must(err)
	return cl
}

// produce sends count records keyed k{i % 17} with values PREFIX-i (kgo is idempotent by default).
func (m *matrix) produce(short string, count int, prefix string) {
	cl := m.client(kgo.DefaultProduceTopic(m.name(short)))
	defer cl.Close()
	c, cancel := ctx()
	defer cancel()
	var records []*kgo.Record
	for i := 0; i < count; i++ {
		records = append(records, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%17)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))})
	}
	must(cl.ProduceSync(c, records...).FirstErr())
}

// readAll reads the topic from the start until it has `expect` records, and half a second more (so that
// a record too many shows).
func (m *matrix) readAll(topic string, readCommitted bool, expect int) []*kgo.Record {
	iso := kgo.ReadUncommitted()
	if readCommitted {
		iso = kgo.ReadCommitted()
	}
	cl := m.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso))
	defer cl.Close()
	var out []*kgo.Record
	deadline := time.Now().Add(wait)
	var extra time.Time
	for extra.IsZero() || time.Now().Before(extra) {
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("timed out reading %s: %d of %d records", topic, len(out), expect))
		}
		pc, pcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		cl.PollFetches(pc).EachRecord(func(r *kgo.Record) { out = append(out, r) })
		pcancel()
		if len(out) >= expect && extra.IsZero() {
			extra = time.Now().Add(500 * time.Millisecond)
		}
	}
	return out
}

func (m *matrix) endOffsets(topic string) map[string]int64 {
	c, cancel := ctx()
	defer cancel()
	ends, err := m.admin.ListEndOffsets(c, topic)
	must(err)
	out := map[string]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[m.tp(o.Topic, o.Partition)] = o.Offset })
	return out
}

func (m *matrix) committed(group string) map[string]int64 {
	c, cancel := ctx()
	defer cancel()
	offsets, err := m.admin.FetchOffsets(c, group)
	must(err)
	must(offsets.Error())
	out := map[string]int64{}
	offsets.Each(func(o kadm.OffsetResponse) { out[m.tp(o.Topic, o.Partition)] = o.At })
	return out
}

func (m *matrix) lag(group string, topics ...string) int64 {
	committed := m.committed(group)
	var lag int64
	for _, t := range topics {
		for tp, end := range m.endOffsets(t) {
			lag += end - committed[tp]
		}
	}
	return lag
}

func sortedKeys[V any](in map[string]V) []string {
	out := make([]string, 0, len(in))
	for k := range in {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
