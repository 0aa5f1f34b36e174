// franz-go's share consumer (kgo.ShareGroup, KIP-932) for tests/integration/test_share_franz.py:
//
//	franz-client share BOOTSTRAP TOPIC GROUP MEMBERS RECORDS TIMEOUT_MS
//
// MEMBERS share consumers of GROUP on TOPIC, each acknowledging every record it polls explicitly
// (Record.Ack): a record whose value is "poison" rejected, the others accepted. One line per
// acknowledgement, "ACK partition offset delivery-count member" or "REJECT ...", one "ACKERR ..." per
// acknowledgement the broker refused (ShareAckCallback); once RECORDS records are accepted the
// members flush their acknowledgements and close, and "DONE accepted" is the last line.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func share(args []string) {
	bootstrap, topic, group := args[0], args[1], args[2]
	members, _ := strconv.Atoi(args[3])
	records, _ := strconv.Atoi(args[4])
	timeoutMs, _ := strconv.Atoi(args[5])
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeoutMs)*time.Millisecond)
	defer cancel()

	var mu sync.Mutex // the output and the tally
	accepted := map[[2]int64]bool{}
	done := make(chan struct{})
	say := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", a...)
	}

	var wg sync.WaitGroup
	clients := make([]*kgo.Client, members)
	for i := range members {
		name := fmt.Sprintf("franz-share-%d", i)
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(bootstrap),
			kgo.ClientID(name),
			kgo.ShareGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.ShareMaxRecords(5), // small fetches, so the members share the work
			kgo.ShareAckCallback(func(_ *kgo.Client, results kgo.ShareAckResults) {
				for _, r := range results {
					if r.Err != nil {
						say("ACKERR %d %s %v", r.Partition, name, r.Err)
					}
				}
			}),
		)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		clients[i] = cl
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				case <-ctx.Done():
					return
				default:
				}
				poll, pollCancel := context.WithTimeout(ctx, 2*time.Second)
				fetches := cl.PollFetches(poll)
				pollCancel()
				fetches.EachRecord(func(r *kgo.Record) {
					if string(r.Value) == "poison" {
						r.Ack(kgo.AckReject)
						say("REJECT %d %d %d %s", r.Partition, r.Offset, r.DeliveryCount(), name)
						return
					}
					r.Ack(kgo.AckAccept)
					mu.Lock()
					fmt.Printf("ACK %d %d %d %s\n", r.Partition, r.Offset, r.DeliveryCount(), name)
					accepted[[2]int64{int64(r.Partition), r.Offset}] = true
					if len(accepted) == records {
						select {
						case <-done:
						default:
							close(done)
						}
					}
					mu.Unlock()
				})
			}
		}()
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	wg.Wait()
	for _, cl := range clients {
		flush, flushCancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := cl.FlushAcks(flush); err != nil {
			say("FLUSHERR %v", err)
		}
		flushCancel()
		cl.Close()
	}
	mu.Lock()
	n := len(accepted)
	mu.Unlock()
	fmt.Printf("DONE %d\n", n)
	if n != records {
		os.Exit(1)
	}
}
