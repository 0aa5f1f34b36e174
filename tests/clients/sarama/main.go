// A sarama 1.22 (Debian's golang-github-shopify-sarama-dev) client for kbroker's integration tests.
//
//	sarama-client produce BOOTSTRAP TOPIC COUNT PREFIX
//	sarama-client consume BOOTSTRAP TOPIC GROUP COUNT
//
// consume joins GROUP, prints each message's "partition offset value" on stdout, marks it, and
// stops after COUNT messages; sarama commits the marked offsets (OffsetCommit v1, as 1.22 always
// does) before Close returns.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

func config() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V2_1_0_0
	c.ClientID = "sarama-test"
	if id := os.Getenv("KBROKER_TEST_CLIENT_ID"); id != "" {
		c.ClientID = id
	}
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.CommitInterval = 200 * time.Millisecond
	c.Consumer.Return.Errors = true
	return c
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
	if len(os.Args) < 5 {
		fail(fmt.Errorf("usage: produce BOOTSTRAP TOPIC COUNT PREFIX | consume BOOTSTRAP TOPIC GROUP COUNT"))
	}
	addrs := []string{os.Args[2]}
	topic := os.Args[3]
	switch os.Args[1] {
	case "produce":
		count, _ := strconv.Atoi(os.Args[4])
		p, err := sarama.NewSyncProducer(addrs, config())
		if err != nil {
			fail(err)
		}
		for i := 0; i < count; i++ {
			value := fmt.Sprintf("%s-%d", os.Args[5], i)
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(value)}); err != nil {
				fail(err)
			}
		}
		if err := p.Close(); err != nil {
			fail(err)
		}
	case "consume":
		count, _ := strconv.Atoi(os.Args[5])
		group, err := sarama.NewConsumerGroup(addrs, os.Args[4], config())
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
	default:
		fail(fmt.Errorf("unknown command %q", os.Args[1]))
	}
}
