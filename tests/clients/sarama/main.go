// IBM/sarama (a Go module, tests/clients/sarama/go.mod) for kbroker's tests:
//
//	sarama-client produce BOOTSTRAP TOPIC COUNT PREFIX
//	sarama-client consume BOOTSTRAP TOPIC GROUP COUNT
//	sarama-client commit-v1 BOOTSTRAP TOPIC GROUP OFFSET
//	sarama-client matrix BOOTSTRAP RUN_PREFIX SCENARIO...
//	sarama-client failover BOOTSTRAP TOPIC GROUP   (failover.go)
//
// produce and consume speak the protocol versions of SARAMA_VERSION (a Kafka version, default 0.10.2.0:
// the oldest sarama lets a consumer group use, so Produce v2 with message format v1, Fetch v3 (v4 with
// isolation), JoinGroup v1, SyncGroup/Heartbeat/LeaveGroup v0, OffsetCommit v2, as the tests of sarama
// 1.22 exercised old versions). consume joins GROUP, prints each message's "partition offset value",
// marks it and stops after COUNT messages; the marked offsets are committed before Close returns.
// commit-v1 commits OFFSET for partition 0 outside any generation with OffsetCommit v1 (Kafka 0.8.2's
// protocol: sarama's offset manager at that version) and prints what OffsetFetch v1 reads back.
// matrix runs the client matrix's scenarios (tests/reference/test_client_matrix.py) at sarama's default
// version (Kafka 2.8's protocol), one JSON line per scenario.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

func config(version sarama.KafkaVersion) *sarama.Config {
	c := sarama.NewConfig()
	c.Version = version
	c.ClientID = "sarama-test"
	if id := os.Getenv("KBROKER_TEST_CLIENT_ID"); id != "" {
		c.ClientID = id
	}
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Interval = 200 * time.Millisecond
	c.Consumer.Return.Errors = true
	return c
}

func oldVersion() sarama.KafkaVersion {
	v := sarama.V0_10_2_0
	if s := os.Getenv("SARAMA_VERSION"); s != "" {
		parsed, err := sarama.ParseKafkaVersion(s)
		if err != nil {
			fail(err)
		}
		v = parsed
	}
	return v
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}

type handler struct {
	mu     sync.Mutex
	want   int
	seen   int
	done   chan struct{}
	closed bool
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.mu.Lock()
		if h.seen < h.want {
			fmt.Printf("%d %d %s\n", msg.Partition, msg.Offset, string(msg.Value))
			s.MarkMessage(msg, "")
			h.seen++
		}
		if h.seen >= h.want && !h.closed {
			h.closed = true
			close(h.done)
		}
		h.mu.Unlock()
	}
	return nil
}

func main() {
	if len(os.Args) < 4 {
		fail(fmt.Errorf("usage: produce BOOTSTRAP TOPIC COUNT PREFIX | consume BOOTSTRAP TOPIC GROUP COUNT | " +
			"commit-v1 BOOTSTRAP TOPIC GROUP OFFSET | matrix BOOTSTRAP RUN_PREFIX SCENARIO..."))
	}
	addrs := []string{os.Args[2]}
	switch os.Args[1] {
	case "matrix":
		runMatrix(os.Args[2], os.Args[3], os.Args[4:])
	case "produce":
		produce(addrs, os.Args[3], os.Args[4], os.Args[5])
	case "consume":
		consume(addrs, os.Args[3], os.Args[4], os.Args[5])
	case "commit-v1":
		commitV1(addrs, os.Args[3], os.Args[4], os.Args[5])
	case "failover":
		failover(os.Args[2], os.Args[3], os.Args[4])
	default:
		fail(fmt.Errorf("unknown command %q", os.Args[1]))
	}
}

func produce(addrs []string, topic, countArg, prefix string) {
	count, _ := strconv.Atoi(countArg)
	p, err := sarama.NewSyncProducer(addrs, config(oldVersion()))
	if err != nil {
		fail(err)
	}
	for i := 0; i < count; i++ {
		value := fmt.Sprintf("%s-%d", prefix, i)
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(value)}); err != nil {
			fail(err)
		}
	}
	if err := p.Close(); err != nil {
		fail(err)
	}
}

func consume(addrs []string, topic, groupID, countArg string) {
	count, _ := strconv.Atoi(countArg)
	group, err := sarama.NewConsumerGroup(addrs, groupID, config(oldVersion()))
	if err != nil {
		fail(err)
	}
	go func() {
		for err := range group.Errors() {
			fmt.Fprintln(os.Stderr, "consumer error:", err)
		}
	}()
	h := &handler{want: count, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{topic}, h); err != nil {
				finished <- err
				return
			}
		}
		finished <- nil
	}()
	select {
	case <-h.done:
	case <-time.After(60 * time.Second):
		fail(fmt.Errorf("timed out after %d of %d messages", h.seen, count))
	}
	time.Sleep(500 * time.Millisecond) // let a commit interval pass with everything marked
	cancel()
	if err := <-finished; err != nil {
		fail(err)
	}
	if err := group.Close(); err != nil {
		fail(err)
	}
}

func commitV1(addrs []string, topic, groupID, offsetArg string) {
	offset, _ := strconv.ParseInt(offsetArg, 10, 64)
	c := config(sarama.V0_8_2_0)
	c.Consumer.Offsets.AutoCommit.Enable = false
	client, err := sarama.NewClient(addrs, c)
	if err != nil {
		fail(err)
	}
	om, err := sarama.NewOffsetManagerFromClient(groupID, client)
	if err != nil {
		fail(err)
	}
	pom, err := om.ManagePartition(topic, 0)
	if err != nil {
		fail(err)
	}
	pom.MarkOffset(offset, "v1")
	om.Commit()
	select {
	case err := <-pom.Errors():
		fail(err)
	default:
	}
	_ = om.Close() // releases the partition's manager too
	_ = client.Close()
	// a fresh client reads the commit back (OffsetFetch v1)
	client, err = sarama.NewClient(addrs, c)
	if err != nil {
		fail(err)
	}
	defer client.Close()
	coordinator, err := client.Coordinator(groupID)
	if err != nil {
		fail(err)
	}
	req := sarama.NewOffsetFetchRequest(c.Version, groupID, map[string][]int32{topic: {0}})
	resp, err := coordinator.FetchOffset(req)
	if err != nil {
		fail(err)
	}
	block := resp.GetBlock(topic, 0)
	fmt.Printf("v%d %d %s %d\n", req.Version, block.Offset, block.Metadata, int16(block.Err))
}
