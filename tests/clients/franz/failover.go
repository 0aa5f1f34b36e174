// franz-go in the cluster failover scenarios (tests/integration/test_cluster_clients.py): an idempotent
// producer (acks=all) and a committing consumer group on one topic until a "stop" line on stdin; then the
// producer flushes and the consumer reads on until it has every acknowledged record. One line per event on
// stdout (A acked, C consumed, E error, P producer done, DONE), as every failover workload prints them:
//
//	franz-client failover BOOTSTRAP TOPIC GROUP
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func failover(bootstrap, topic, group string) {
	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Println(line)
	}
	var stop, produced atomic.Bool
	acked := sync.Map{}
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() && strings.TrimSpace(in.Text()) != "stop" {
		}
		stop.Store(true)
	}()
	seeds := kgo.SeedBrokers(strings.Split(bootstrap, ",")...)
	logger := kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil))
	producer, err := kgo.NewClient(seeds, logger, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.RecordDeliveryTimeout(120*time.Second))
	if err != nil {
		say("E producer: " + err.Error())
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			value := fmt.Sprintf("r%06d", i)
			rec := &kgo.Record{Key: []byte(fmt.Sprint(i % 16)), Value: []byte(value)}
			producer.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
				if err != nil {
					say("E produce: " + err.Error())
					return
				}
				acked.Store(value, true)
				say("A " + value)
			})
			time.Sleep(2 * time.Millisecond)
		}
		if err := producer.Flush(context.Background()); err != nil {
			say("E flush: " + err.Error())
		}
		producer.Close()
		produced.Store(true)
		say("P")
	}()
	consumer, err := kgo.NewClient(seeds, logger, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond))
	if err != nil {
		say("E consumer: " + err.Error())
		return
	}
	consumed := map[string]bool{}
	idleSince := time.Now()
	allConsumed := func() bool {
		all := true
		acked.Range(func(k, _ any) bool {
			all = consumed[k.(string)]
			return all
		})
		return all
	}
	for !(produced.Load() && allConsumed()) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fetches := consumer.PollFetches(ctx)
		cancel()
		fetches.EachError(func(t string, p int32, err error) {
			if err != context.DeadlineExceeded {
				say(fmt.Sprintf("E consume: %s[%d]: %v", t, p, err))
			}
		})
		if fetches.NumRecords() == 0 {
			if produced.Load() && time.Since(idleSince) > 20*time.Second {
				break
			}
			continue
		}
		idleSince = time.Now()
		fetches.EachRecord(func(r *kgo.Record) {
			consumed[string(r.Value)] = true
			say("C " + string(r.Value))
		})
		if err := consumer.CommitUncommittedOffsets(context.Background()); err != nil {
			say("E commit: " + err.Error())
		}
	}
	consumer.Close()
	<-done
	say("DONE")
}
