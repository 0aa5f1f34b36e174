package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// idempotent: 300 keyed records from an idempotent producer (acks=all); every one acknowledged at the next
// offset of its partition and read back once, in the order sent.
func (m *matrix) idempotent() (obs, error) {
	m.createTopics(3, "idem")
	topic := m.name("idem")
	cl := m.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5e6))
	var records []*kgo.Record
	for i := 0; i < 300; i++ {
		records = append(records, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%17)), Value: []byte(fmt.Sprintf("v-%d", i))})
	}
	c, cancel := ctx()
	results := cl.ProduceSync(c, records...)
	cancel()
	cl.Close()
	if err := results.FirstErr(); err != nil {
		return nil, err
	}
	sent := map[int32][]string{}
	contiguous := true
	for _, r := range results {
		contiguous = contiguous && r.Record.Offset == int64(len(sent[r.Record.Partition]))
		sent[r.Record.Partition] = append(sent[r.Record.Partition], string(r.Record.Value))
	}
	read := map[int32][]string{}
	for _, r := range m.readAll(topic, false, 300) {
		read[r.Partition] = append(read[r.Partition], string(r.Value))
	}
	perPartition := map[string]int{}
	inOrder := len(read) == len(sent)
	for p, values := range sent {
		perPartition[strconv.Itoa(int(p))] = len(values)
		inOrder = inOrder && strings.Join(values, ",") == strings.Join(read[p], ",")
	}
	return obs{
		"records_per_partition":    perPartition,
		"acked_offsets_contiguous": contiguous,
		"read_back_in_send_order":  inOrder,
		"end_offsets":              m.endOffsets(topic),
	}, nil
}

// transactional: consume-transform-produce in a GroupTransactSession (offsets committed in the
// transaction), then an aborted transaction and a committed one from a plain transactional producer,
// then a second producer with its transactional.id fences it.
func (m *matrix) transactional() (obs, error) {
	m.createTopics(2, "tx-in", "tx-out")
	in, out, group := m.name("tx-in"), m.name("tx-out"), m.name("tx-group")
	m.produce("tx-in", 40, "in")
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(m.bootstrap), kgo.TransactionalID(m.name("tx-id")),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RequireStableFetchOffsets(), kgo.DefaultProduceTopic(out))
	if err != nil {
		return nil, err
	}
	transformed := 0
	for transformed < 40 {
		pc, pcancel := context.WithTimeout(context.Background(), wait)
		fetches := sess.PollRecords(pc, 7)
		pcancel()
		if err := fetches.Err0(); err != nil {
			sess.Close()
			return nil, err
		}
		if fetches.NumRecords() == 0 {
			continue
		}
		must(sess.Begin())
		c, cancel := ctx()
		fetches.EachRecord(func(r *kgo.Record) {
			sess.Produce(c, &kgo.Record{Key: r.Key, Value: []byte(strings.ToUpper(string(r.Value)))}, nil)
			transformed++
		})
		committed, err := sess.End(c, kgo.TryCommit)
		cancel()
		if err != nil || !committed {
			sess.Close()
			return nil, fmt.Errorf("transaction not committed: %v", err)
		}
	}
	sess.Close()

	producer := m.client(kgo.TransactionalID(m.name("tx-id-2")), kgo.DefaultProduceTopic(out))
	defer producer.Close()
	c, cancel := ctx()
	defer cancel()
	for round, prefix := range []string{"aborted", "late"} {
		must(producer.BeginTransaction())
		n := map[string]int{"aborted": 5, "late": 3}[prefix]
		for i := 0; i < n; i++ {
			must(producer.ProduceSync(c, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}).FirstErr())
		}
		must(producer.EndTransaction(c, kgo.TransactionEndTry(round == 1)))
	}
	successor := m.client(kgo.TransactionalID(m.name("tx-id-2")), kgo.DefaultProduceTopic(out))
	defer successor.Close()
	must(successor.BeginTransaction())
	must(successor.ProduceSync(c, &kgo.Record{Key: []byte("k"), Value: []byte("successor")}).FirstErr())
	must(successor.EndTransaction(c, kgo.TryAbort))
	zombie := "not fenced"
	if err := producer.BeginTransaction(); err != nil {
		zombie = outcome(err)
	} else if err := producer.ProduceSync(c, &kgo.Record{Key: []byte("k"), Value: []byte("zombie")}).FirstErr(); err != nil {
		zombie = outcome(err)
		_ = producer.AbortBufferedRecords(c)
		_ = producer.EndTransaction(c, kgo.TryAbort)
	} else if err := producer.EndTransaction(c, kgo.TryCommit); err != nil {
		zombie = outcome(err)
	}

	var seen, expected []string
	for _, r := range m.readAll(out, true, 43) {
		seen = append(seen, string(r.Value))
	}
	for i := 0; i < 40; i++ {
		expected = append(expected, fmt.Sprintf("IN-%d", i))
	}
	for i := 0; i < 3; i++ {
		expected = append(expected, fmt.Sprintf("late-%d", i))
	}
	sort.Strings(seen)
	sort.Strings(expected)
	uncommitted := m.readAll(out, false, 48)
	aborted := 0
	for _, r := range uncommitted {
		if strings.HasPrefix(string(r.Value), "aborted-") {
			aborted++
		}
	}
	return obs{
		"read_committed_count":                    len(seen),
		"read_committed_is_exactly_the_committed": strings.Join(seen, ",") == strings.Join(expected, ","),
		"read_uncommitted_count":                  len(uncommitted),
		"read_uncommitted_aborted":                aborted,
		"group_committed":                         m.committed(group),
		"group_lag":                               m.lag(group, in),
		"zombie_producer":                         zombie,
	}, nil
}
