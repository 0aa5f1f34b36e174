// sarama in the cluster failover scenarios (tests/integration/test_cluster_clients.py): an idempotent async
// producer (acks=all) and a consumer group committing what it consumed on one topic until a "stop" line on stdin; then the
// producer closes (flushing) and the consumer reads on until it has every acknowledged record. One line per
// event on stdout (A acked, C consumed, E error, P producer done, DONE), as every failover workload prints:
//
//	sarama-client failover BOOTSTRAP TOPIC GROUP
package main

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
)

type failoverHandler struct {
	say      func(string)
	consumed *sync.Map
	last     *atomic.Int64
}

func (h *failoverHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *failoverHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *failoverHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.consumed.Store(string(msg.Value), true)
		h.last.Store(time.Now().UnixNano())
		h.say("C " + string(msg.Value))
		s.MarkMessage(msg, "") // committed by sarama's offset manager within 100 ms, and at Close
	}
	return nil
}

func failover(bootstrap, topic, group string) {
	if os.Getenv("KBROKER_SARAMA_LOG") != "" { // sarama's own log on stderr (the workload's log file), to look into a run
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
	}
	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Println(line)
	}
	var stop, produced atomic.Bool
	var acked, consumed sync.Map
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() && strings.TrimSpace(in.Text()) != "stop" {
		}
		stop.Store(true)
	}()
	addrs := strings.Split(bootstrap, ",")
	pc := config(sarama.V2_8_0_0)
	pc.ClientID = "sarama-failover"
	pc.Producer.Idempotent = true
	pc.Producer.Retry.Max = 1000
	pc.Producer.Retry.Backoff = 50 * time.Millisecond
	pc.Net.MaxOpenRequests = 1
	pc.Producer.Return.Errors = true
	producer, err := sarama.NewAsyncProducer(addrs, pc)
	if err != nil {
		say("E producer: " + err.Error())
		return
	}
	var results sync.WaitGroup
	results.Add(2)
	go func() {
		defer results.Done()
		for m := range producer.Successes() {
			value := string(m.Value.(sarama.StringEncoder))
			acked.Store(value, true)
			say("A " + value)
		}
	}()
	go func() {
		defer results.Done()
		for e := range producer.Errors() {
			say("E produce: " + e.Err.Error())
		}
	}()
	go func() {
		for i := 0; !stop.Load(); i++ {
			value := fmt.Sprintf("r%06d", i)
			producer.Input() <- &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprint(i % 16)),
				Value: sarama.StringEncoder(value)}
			time.Sleep(2 * time.Millisecond)
		}
		producer.AsyncClose()
		results.Wait()
		produced.Store(true)
		say("P")
	}()

	cc := config(sarama.V2_8_0_0)
	cc.ClientID = "sarama-failover"
	// Each message is marked and sarama commits the marks every 100 ms (and the last ones when the group
	// closes), rather than a synchronous Commit() after each message: sarama 1.61 holds a connection's lock
	// through a whole round trip (Broker.sendAndReceive), a Fetch's 500 ms long poll included, and Commit()
	// takes the same lock (offsetManager.flushToBrokerFor). Whenever the group's coordinator also leads a
	// partition the consumer has caught up on, every Commit() waits for a fetch and the handlers crawl at a
	// few records a second (docs/cluster.md); on Kafka each Commit() also waits for the replicated append.
	cc.Consumer.Offsets.AutoCommit.Enable = true
	cc.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cc.Consumer.Group.Session.Timeout = 6 * time.Second
	cc.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cg, err := sarama.NewConsumerGroup(addrs, group, cc)
	if err != nil {
		say("E consumer: " + err.Error())
		return
	}
	go func() {
		for err := range cg.Errors() {
			say("E consume: " + err.Error())
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	h := &failoverHandler{say: say, consumed: &consumed, last: &last}
	go func() {
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, h); err != nil && ctx.Err() == nil {
				say("E consume: " + err.Error())
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	for {
		time.Sleep(100 * time.Millisecond)
		if !produced.Load() {
			continue
		}
		all := true
		acked.Range(func(k, _ any) bool {
			_, all = consumed.Load(k)
			return all
		})
		if all || time.Since(time.Unix(0, last.Load())) > 20*time.Second {
			break
		}
	}
	cancel()
	cg.Close()
	say("DONE")
}
