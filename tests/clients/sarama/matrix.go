package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

type obs map[string]any

type matrix struct {
	addrs []string
	run   string
	admin sarama.ClusterAdmin
}

const wait = 60 * time.Second

func runMatrix(bootstrap, run string, scenarios []string) {
	admin, err := sarama.NewClusterAdmin([]string{bootstrap}, matrixConfig(run+"-admin"))
	if err != nil {
		fail(err)
	}
	m := &matrix{addrs: []string{bootstrap}, run: run, admin: admin}
	enc := json.NewEncoder(os.Stdout)
	for _, name := range scenarios {
		line := map[string]any{"scenario": name}
		if observed, err := m.scenario(name); err != nil {
			line["error"] = err.Error()
		} else {
			line["observed"] = observed
		}
		_ = enc.Encode(line)
	}
	_ = admin.Close()
}

func matrixConfig(clientID string) *sarama.Config {
	c := config(sarama.DefaultVersion)
	c.ClientID = clientID
	return c
}

func (m *matrix) scenario(name string) (out obs, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	switch {
	case name == "producer-idempotent":
		return m.idempotent(), nil
	case name == "admin":
		return m.adminScenario(), nil
	case strings.HasPrefix(name, "classic-"):
		return m.group(strings.TrimPrefix(name, "classic-")), nil
	}
	return nil, fmt.Errorf("unknown scenario %q", name)
}

func (m *matrix) name(short string) string { return m.run + "-" + short }

func (m *matrix) tp(topic string, partition int32) string {
	return fmt.Sprintf("%s-%d", strings.TrimPrefix(topic, m.run+"-"), partition)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// outcome is "ok" or the Kafka error code a call ended with.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var ke sarama.KError
	if errors.As(err, &ke) {
		return fmt.Sprintf("error %d", int16(ke))
	}
	return err.Error()
}

func (m *matrix) createTopics(partitions int32, shorts ...string) {
	for _, s := range shorts {
		must(m.admin.CreateTopic(m.name(s), &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false))
	}
}

func (m *matrix) produce(topic string, values []string) []*sarama.ProducerMessage {
	c := matrixConfig(m.run + "-producer")
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1
	c.Producer.Partitioner = sarama.NewHashPartitioner
	p, err := sarama.NewSyncProducer(m.addrs, c)
	must(err)
	defer p.Close()
	var msgs []*sarama.ProducerMessage
	for i, v := range values {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i%17)),
			Value: sarama.StringEncoder(v)})
	}
	must(p.SendMessages(msgs))
	return msgs
}

func (m *matrix) client() sarama.Client {
	cl, err := sarama.NewClient(m.addrs, matrixConfig(m.run+"-reader"))
	must(err)
	return cl
}

func (m *matrix) endOffsets(topic string, partitions int32) map[string]int64 {
	cl := m.client()
	defer cl.Close()
	out := map[string]int64{}
	for p := int32(0); p < partitions; p++ {
		off, err := cl.GetOffset(topic, p, sarama.OffsetNewest)
		must(err)
		out[m.tp(topic, p)] = off
	}
	return out
}

// readPartition reads one partition from its start to its end offset as it is now.
func (m *matrix) readPartition(topic string, partition int32) []string {
	cl := m.client()
	defer cl.Close()
	end, err := cl.GetOffset(topic, partition, sarama.OffsetNewest)
	must(err)
	consumer, err := sarama.NewConsumerFromClient(cl)
	must(err)
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, partition, sarama.OffsetOldest)
	must(err)
	defer pc.Close()
	var out []string
	for next := int64(0); next < end; {
		select {
		case msg := <-pc.Messages():
			out = append(out, string(msg.Value))
			next = msg.Offset + 1
		case <-time.After(wait):
			panic(fmt.Sprintf("timed out reading %s-%d", topic, partition))
		}
	}
	return out
}

// idempotent: 300 keyed records from an idempotent producer; each at the next offset of its partition and
// read back once, in the order sent.
func (m *matrix) idempotent() obs {
	m.createTopics(3, "idem")
	topic := m.name("idem")
	var values []string
	for i := 0; i < 300; i++ {
		values = append(values, fmt.Sprintf("v-%d", i))
	}
	sent := map[int32][]string{}
	contiguous := true
	for _, msg := range m.produce(topic, values) {
		contiguous = contiguous && msg.Offset == int64(len(sent[msg.Partition]))
		sent[msg.Partition] = append(sent[msg.Partition], fmt.Sprint(msg.Value))
	}
	perPartition := map[string]int{}
	inOrder := true
	for p, vs := range sent {
		perPartition[strconv.Itoa(int(p))] = len(vs)
		inOrder = inOrder && strings.Join(vs, ",") == strings.Join(m.readPartition(topic, p), ",")
	}
	return obs{"records_per_partition": perPartition, "acked_offsets_contiguous": contiguous,
		"read_back_in_send_order": inOrder, "end_offsets": m.endOffsets(topic, 3)}
}

// member is one consumer group member: its sessions' claims and what it consumed.
type member struct {
	group    sarama.ConsumerGroup
	mu       sync.Mutex
	claims   map[string][]int32
	setups   int
	cleanups int
	shared   *sync.Mutex // guards consumed and dups, which the members share
	consumed map[string]bool
	dups     *int
	cancel   context.CancelFunc
	done     chan struct{}
}

func (mb *member) Setup(s sarama.ConsumerGroupSession) error {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	mb.setups++
	mb.claims = s.Claims()
	return nil
}

func (mb *member) Cleanup(s sarama.ConsumerGroupSession) error {
	s.Commit() // what was consumed is committed before it moves
	mb.mu.Lock()
	defer mb.mu.Unlock()
	mb.cleanups++
	mb.claims = nil
	return nil
}

func (mb *member) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		mb.shared.Lock()
		key := msg.Topic + "/" + string(msg.Value)
		if mb.consumed[key] {
			*mb.dups++
		}
		mb.consumed[key] = true
		mb.shared.Unlock()
		s.MarkMessage(msg, "")
	}
	return nil
}

func (mb *member) assignment(m *matrix) []string {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	out := []string{}
	for t, ps := range mb.claims {
		for _, p := range ps {
			out = append(out, m.tp(t, p))
		}
	}
	sort.Strings(out)
	return out
}

func (m *matrix) join(clientID, group, strategy string, topics []string, consumed map[string]bool, mu *sync.Mutex,
	dups *int) *member {
	c := matrixConfig(clientID)
	switch strategy {
	case "range":
		c.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	case "roundrobin":
		c.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
	case "sticky":
		c.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategySticky()}
	}
	c.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	c.Consumer.Group.Session.Timeout = 10 * time.Second
	g, err := sarama.NewConsumerGroup(m.addrs, group, c)
	must(err)
	ctx, cancel := context.WithCancel(context.Background())
	mb := &member{group: g, shared: mu, consumed: consumed, dups: dups, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(mb.done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, topics, mb); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "consume:", err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return mb
}

func (mb *member) close() {
	mb.cancel()
	<-mb.done
	_ = mb.group.Close()
}

func waitFor(what string, done func() bool) {
	deadline := time.Now().Add(wait)
	for !done() {
		if time.Now().After(deadline) {
			panic("timed out: " + what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// group: the classic-protocol scenario of the Java client with sarama's strategies.
func (m *matrix) group(strategy string) obs {
	tag := "classic-" + strategy
	m.createTopics(3, tag+"-x", tag+"-y")
	var xs, ys []string
	for i := 0; i < 30; i++ {
		xs = append(xs, fmt.Sprintf("x-%d", i))
		ys = append(ys, fmt.Sprintf("y-%d", i))
	}
	m.produce(m.name(tag+"-x"), xs)
	m.produce(m.name(tag+"-y"), ys)
	group := m.name("group-" + tag)
	topics := []string{m.name(tag + "-x"), m.name(tag + "-y")}
	consumed := map[string]bool{}
	var mu sync.Mutex
	dups := 0
	out := obs{}
	a := m.join(m.name("a"), group, strategy, topics, consumed, &mu, &dups)
	waitFor("a alone owns all six", func() bool { return len(a.assignment(m)) == 6 })
	out["alone_a"] = a.assignment(m)
	b := m.join(m.name("b"), group, strategy, topics, consumed, &mu, &dups)
	waitFor("a and b share the six", func() bool {
		sa, sb := a.assignment(m), b.assignment(m)
		return len(sa) > 0 && len(sb) > 0 && len(sa)+len(sb) == 6
	})
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(consumed)
	}
	waitFor("consuming 60 records", func() bool { return count() >= 60 })
	if strategy == "sticky" {
		// sarama's sticky strategy walks Go maps, whose order is random: which three move differs run to run
		sizes := []int{len(a.assignment(m)), len(b.assignment(m))}
		sort.Ints(sizes)
		out["shared_sizes"] = sizes
	} else {
		out["shared_a"], out["shared_b"] = a.assignment(m), b.assignment(m)
	}
	time.Sleep(500 * time.Millisecond) // an auto-commit interval with everything marked
	described, err := m.admin.DescribeConsumerGroups([]string{group})
	must(err)
	out["described_state"] = described[0].State
	out["described_protocol_type"] = described[0].ProtocolType
	out["described_assignor"] = described[0].Protocol
	out["described_members"] = len(described[0].Members)
	b.close()
	waitFor("a owns all six again", func() bool { return len(a.assignment(m)) == 6 })
	out["after_leave_a"] = a.assignment(m)
	out["records_consumed"] = count()
	mu.Lock()
	out["duplicates"] = dups
	mu.Unlock()
	out["sessions_a"] = a.setups
	out["sessions_b"] = b.setups
	a.close()
	offsets, err := m.admin.ListConsumerGroupOffsets(group, nil)
	must(err)
	committed := map[string]int64{}
	var lag int64
	for _, t := range topics {
		for tp, end := range m.endOffsets(t, 3) {
			p, _ := strconv.Atoi(tp[len(tp)-1:])
			block := offsets.GetBlock(t, int32(p))
			committed[tp] = block.Offset
			lag += end - block.Offset
		}
	}
	out["committed"] = committed
	out["lag"] = lag
	after, err := m.admin.DescribeConsumerGroups([]string{group})
	must(err)
	out["state_after_close"] = after[0].State
	return out
}

func str(s string) *string { return &s }

// settle waits (10 s at most) until a change shows: Kafka answers CreateTopics and IncrementalAlterConfigs
// once its controller has taken them and its broker's view follows a moment later, kbroker's at once.
func settle(holds func() bool) {
	deadline := time.Now().Add(10 * time.Second)
	for !holds() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// adminScenario: part of AdminScenario.java through sarama's ClusterAdmin.
func (m *matrix) adminScenario() obs {
	out := obs{}
	topic := m.name("adm-topic")
	out["create"] = outcome(m.admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": str("compact"), "retention.ms": str("3600000")}}, false))
	out["create_again"] = outcome(m.admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false))
	out["create_bad_name"] = outcome(m.admin.CreateTopic("bad/name", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false))
	settle(func() bool {
		md, err := m.admin.DescribeTopics([]string{topic})
		return err == nil && len(md) == 1 && len(md[0].Partitions) == 2
	})
	md, err := m.admin.DescribeTopics([]string{topic, m.name("no-such-topic")})
	must(err)
	for _, t := range md {
		if t.Name == topic {
			out["describe_partitions"] = len(t.Partitions)
		} else {
			out["describe_unknown"] = outcome(t.Err)
		}
	}
	alter := func(entries map[string]sarama.IncrementalAlterConfigsEntry) string {
		return outcome(m.admin.IncrementalAlterConfig(sarama.TopicResource, topic, entries, false))
	}
	out["alter_configs"] = alter(map[string]sarama.IncrementalAlterConfigsEntry{
		"retention.ms":      {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: str("7200000")},
		"max.message.bytes": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: str("200000")},
		"cleanup.policy":    {Operation: sarama.IncrementalAlterConfigsOperationDelete},
	})
	settle(func() bool {
		entries, err := m.admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
		for _, e := range entries {
			if e.Name == "retention.ms" {
				return err == nil && e.Value == "7200000"
			}
		}
		return false
	})
	entries, err := m.admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	must(err)
	described := map[string]any{}
	for _, e := range entries {
		switch e.Name {
		case "retention.ms", "max.message.bytes", "cleanup.policy", "segment.bytes":
			described[e.Name] = []any{e.Value, e.Source.String(), e.ReadOnly}
		}
	}
	out["described_configs"] = described
	out["alter_bad_value"] = alter(map[string]sarama.IncrementalAlterConfigsEntry{
		"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: str("soon")}})
	out["create_partitions"] = outcome(m.admin.CreatePartitions(topic, 3, nil, false))
	out["create_partitions_fewer"] = outcome(m.admin.CreatePartitions(topic, 2, nil, false))

	m.createTopics(1, "adm-data")
	data := m.name("adm-data")
	var values []string
	for i := 0; i < 30; i++ {
		values = append(values, fmt.Sprintf("d-%d", i))
	}
	m.produce(data, values)
	out["delete_records"] = outcome(m.admin.DeleteRecords(data, map[int32]int64{0: 12}))
	out["delete_records_beyond_end"] = outcome(m.admin.DeleteRecords(data, map[int32]int64{0: 99}))
	cl := m.client()
	earliest, err := cl.GetOffset(data, 0, sarama.OffsetOldest)
	must(err)
	cl.Close()
	out["earliest_after_delete"] = earliest
	out["read_after_delete"] = len(m.readPartition(data, 0))

	group := m.name("adm-group")
	om, err := sarama.NewOffsetManagerFromClient(group, m.client())
	must(err)
	pom, err := om.ManagePartition(data, 0)
	must(err)
	pom.MarkOffset(20, "meta")
	om.Commit()
	_ = pom.Close()
	_ = om.Close()
	offsets, err := m.admin.ListConsumerGroupOffsets(group, map[string][]int32{data: {0}})
	must(err)
	block := offsets.GetBlock(data, 0)
	out["group_offsets"] = []any{block.Offset, block.Metadata}
	listed, err := m.admin.ListConsumerGroups()
	must(err)
	var groups []string
	for g, protocolType := range listed {
		if strings.HasPrefix(g, m.run+"-adm") {
			groups = append(groups, strings.TrimPrefix(g, m.run+"-")+":"+protocolType)
		}
	}
	sort.Strings(groups)
	out["listed_groups"] = groups
	out["delete_group_offsets"] = outcome(m.admin.DeleteConsumerGroupOffset(group, data, 0))
	out["delete_group"] = outcome(m.admin.DeleteConsumerGroup(group))
	out["delete_group_again"] = outcome(m.admin.DeleteConsumerGroup(group))
	out["delete_topic"] = outcome(m.admin.DeleteTopic(topic))
	out["delete_topic_again"] = outcome(m.admin.DeleteTopic(topic))
	return out
}
