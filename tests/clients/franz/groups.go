package main

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// member is one group member and what its rebalance callbacks saw.
type member struct {
	cl                      *kgo.Client
	mu                      sync.Mutex
	owned                   map[string]map[int32]bool
	assigned, revoked, lost int
	consumed                map[string]bool
	duplicates              int
}

func (m *matrix) newMember(clientID, group string, protocol, balancer string, consumed map[string]bool,
	opts ...kgo.Opt) *member {
	mb := &member{owned: map[string]map[int32]bool{}, consumed: consumed}
	var b kgo.GroupBalancer
	switch balancer {
	case "range":
		b = kgo.RangeBalancer()
	case "roundrobin":
		b = kgo.RoundRobinBalancer()
	case "sticky", "uniform":
		b = kgo.StickyBalancer()
	case "cooperative-sticky":
		b = kgo.CooperativeStickyBalancer()
	default:
		panic("unknown balancer " + balancer)
	}
	opts = append(opts, kgo.ClientID(clientID), kgo.ConsumerGroup(group), kgo.Balancers(b), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.SessionTimeout(10*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			mb.mu.Lock()
			defer mb.mu.Unlock()
			mb.assigned++
			for t, ps := range parts {
				if mb.owned[t] == nil {
					mb.owned[t] = map[int32]bool{}
				}
				for _, p := range ps {
					mb.owned[t][p] = true
				}
			}
		}),
		kgo.OnPartitionsRevoked(func(c context.Context, cl *kgo.Client, parts map[string][]int32) {
			_ = cl.CommitUncommittedOffsets(c) // what was consumed is committed before it moves
			mb.mu.Lock()
			defer mb.mu.Unlock()
			mb.revoked++
			mb.drop(parts)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			mb.mu.Lock()
			defer mb.mu.Unlock()
			mb.lost++
			mb.drop(parts)
		}))
	if protocol == "consumer" {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	mb.cl = m.client(opts...)
	return mb
}

func (mb *member) drop(parts map[string][]int32) {
	for t, ps := range parts {
		for _, p := range ps {
			delete(mb.owned[t], p)
		}
	}
}

func (mb *member) poll() {
	pc, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	fetches := mb.cl.PollRecords(pc, 10)
	cancel()
	fetches.EachRecord(func(r *kgo.Record) {
		mb.mu.Lock()
		key := r.Topic + "/" + string(r.Value)
		if mb.consumed[key] {
			mb.duplicates++
		}
		mb.consumed[key] = true
		mb.mu.Unlock()
	})
}

func (mb *member) assignment(m *matrix) []string {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	out := []string{}
	for t, ps := range mb.owned {
		for p := range ps {
			out = append(out, m.tp(t, p))
		}
	}
	sort.Strings(out)
	return out
}

func waitFor(what string, done func() bool) {
	deadline := time.Now().Add(wait)
	for !done() {
		if time.Now().After(deadline) {
			panic("timed out: " + what)
		}
	}
}

// group: the scenario of ConsumerScenarios.group in the Java client: "a" joins alone, then "b"; both consume
// the 60 records once and commit; "b" leaves and "a" owns all six partitions again.
func (m *matrix) group(protocol, balancer string) (obs, error) {
	tag := protocol + "-" + balancer
	m.createTopics(3, tag+"-x", tag+"-y")
	m.produce(tag+"-x", 30, "x")
	m.produce(tag+"-y", 30, "y")
	group := m.name("group-" + tag)
	topics := kgo.ConsumeTopics(m.name(tag+"-x"), m.name(tag+"-y"))
	consumed := map[string]bool{}
	out := obs{}
	a := m.newMember(m.name("a"), group, protocol, balancer, consumed, topics)
	defer a.cl.Close()
	waitFor("a alone owns all six", func() bool { a.poll(); return len(a.assignment(m)) == 6 })
	out["alone_a"] = a.assignment(m)
	b := m.newMember(m.name("b"), group, protocol, balancer, consumed, topics)
	bClosed := false
	defer func() {
		if !bClosed {
			b.cl.Close()
		}
	}()
	waitFor("a and b share the six", func() bool {
		a.poll()
		b.poll()
		sa, sb := a.assignment(m), b.assignment(m)
		union := map[string]bool{}
		for _, p := range append(append([]string{}, sa...), sb...) {
			union[p] = true
		}
		return len(sa) > 0 && len(sb) > 0 && len(sa)+len(sb) == 6 && len(union) == 6
	})
	waitFor("consuming 60 records", func() bool {
		a.poll()
		b.poll()
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(consumed) >= 60
	})
	sa, sb := a.assignment(m), b.assignment(m)
	if protocol == "classic" && balancer != "sticky" {
		out["shared_a"], out["shared_b"] = sa, sb
	} else if protocol == "classic" {
		// kgo's sticky balancer walks Go maps, whose order is random: which three move differs run to run
		sizes := []int{len(sa), len(sb)}
		sort.Ints(sizes)
		out["shared_sizes"] = sizes
	} else {
		split := [][]string{sa, sb}
		sort.Slice(split, func(i, j int) bool {
			if len(split[i]) != len(split[j]) {
				return len(split[i]) < len(split[j])
			}
			return fmt.Sprint(split[i]) < fmt.Sprint(split[j])
		})
		if balancer == "range" {
			out["shared_split"] = split
		} else {
			out["shared_sizes"] = []int{len(split[0]), len(split[1])}
		}
	}
	c, cancel := ctx()
	defer cancel()
	must(a.cl.CommitUncommittedOffsets(c))
	must(b.cl.CommitUncommittedOffsets(c))
	out["records_consumed"] = len(consumed)
	out["duplicates"] = a.duplicates + b.duplicates
	out["committed"] = m.committed(group)
	out["lag"] = m.lag(group, m.name(tag+"-x"), m.name(tag+"-y"))
	if protocol == "classic" {
		described, err := m.admin.DescribeGroups(c, group)
		must(err)
		d := described[group]
		out["described_state"] = d.State
		out["described_protocol_type"] = d.ProtocolType
		out["described_assignor"] = d.Protocol
		out["described_members"] = len(d.Members)
	} else {
		described, err := m.admin.DescribeConsumerGroups(c, group)
		must(err)
		d := described[group]
		out["described_state"] = d.State
		out["described_assignor"] = d.AssignorName
		out["described_members"] = len(d.Members)
		out["described_group_epoch"] = d.Epoch
	}
	b.cl.Close()
	bClosed = true
	waitFor("a owns all six again", func() bool { a.poll(); return len(a.assignment(m)) == 6 })
	out["after_leave_a"] = a.assignment(m)
	if protocol == "classic" && balancer == "cooperative-sticky" {
		// Under the cooperative protocol a member may be handed its share over one round or two (a
		// SyncGroup overtaken by the next rebalance, how the leader's revocations fall): the count of
		// rounds depends on timing, on Kafka and on kbroker alike. That each was handed partitions is not.
		out["rebalance_callbacks_a"] = []any{a.assigned > 0, a.revoked, a.lost}
		out["rebalance_callbacks_b"] = []any{b.assigned > 0, b.revoked, b.lost}
	} else if protocol == "classic" {
		out["rebalance_callbacks_a"] = []int{a.assigned, a.revoked, a.lost}
		out["rebalance_callbacks_b"] = []int{b.assigned, b.revoked, b.lost}
	} else {
		// how many assignments the client reconciles depends on when its heartbeats fall: the group epoch
		// counts the rebalances (as in the Java client's scenario)
		described, err := m.admin.DescribeConsumerGroups(c, group)
		must(err)
		out["group_epoch_after_leave"] = described[group].Epoch
	}
	a.cl.Close()
	described, err := m.admin.DescribeGroups(c, group)
	must(err)
	out["state_after_close"] = described[group].State
	return out, nil
}

// regexClassic: kgo resolves the pattern against metadata (client side) and joins with the topics it matched;
// a topic created later that matches is picked up at the next metadata refresh.
func (m *matrix) regexClassic() (obs, error) {
	m.createTopics(1, "rxc-a", "rxc-b", "other-rxc")
	mb := m.newMember(m.name("rxc"), m.name("group-rxc"), "classic", "range", map[string]bool{},
		kgo.ConsumeRegex(), kgo.ConsumeTopics("^"+regexp.QuoteMeta(m.name("rxc-"))+".*"), kgo.MetadataMaxAge(500*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond))
	defer mb.cl.Close()
	waitFor("the two matching topics", func() bool { mb.poll(); return len(mb.assignment(m)) == 2 })
	out := obs{"assigned": topicsOf(mb.assignment(m))}
	m.createTopics(1, "rxc-c")
	deadline := time.Now().Add(30 * time.Second)
	for len(mb.assignment(m)) < 3 && time.Now().Before(deadline) {
		mb.poll()
	}
	out["assigned_after_new_topic"] = topicsOf(mb.assignment(m))
	return out, nil
}

func topicsOf(parts []string) []string {
	seen := map[string]bool{}
	for _, p := range parts {
		seen[p[:len(p)-2]] = true
	}
	return sortedKeys(seen)
}
