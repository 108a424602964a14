package chaos

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The checker on crafted histories, without an API server: every invariant catches a violation
// made for it, and a clean remediation breaks none. This is what makes a green chaos run mean
// something.

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// history builds crafted steps for the checker.
type history struct {
	t   *testing.T
	k   *checker
	cur *state
	rv  uint64
	crs []*crRecord
}

func newHistory(t *testing.T) *history {
	s := initialState(t0)
	return &history{t: t, k: newChecker(s, 100), cur: s, rv: 100}
}

// step applies mutate to a copy of the model and advances the resourceVersion; the CRs the step
// makes get resourceVersions within it.
func (h *history) step(mutate func(s *state)) {
	c := h.cur.clone()
	c.Step++
	if mutate != nil {
		mutate(c)
	}
	h.cur = c
	h.rv += 100
}

func (h *history) fail(s *state, name string, status corev1.ConditionStatus, ago time.Duration) {
	n := s.Nodes[name]
	n.Ready, n.Since, n.HealthyFrom = status, s.Now.Add(-ago), s.Step
	s.Nodes[name] = n
}

func (h *history) recover(s *state, name string) {
	n := s.Nodes[name]
	n.Ready, n.Since, n.HealthyFrom = corev1.ConditionTrue, s.Now, s.Step
	s.Nodes[name] = n
}

// cr records a CR created in the current step (offset orders CRs within the step).
func (h *history) cr(node, owner string, offset uint64) *crRecord {
	c := &crRecord{UID: types.UID(node + "-" + owner + "-" + string(rune('a'+len(h.crs)))), Kind: "TestRemediation", Name: node,
		Node: node, Owner: owner, OwnerUID: types.UID(owner), Created: h.rv - 100 + offset}
	h.crs = append(h.crs, c)
	return c
}

// check runs the checker on the current step and returns the invariants it reports.
func (h *history) check(leases ...leaseInfo) []string {
	return h.checkSnapshot(snapshot{Leases: leases, Settled: true})
}

func (h *history) checkSnapshot(snap snapshot) []string {
	snap.RV, snap.CRs = h.rv, h.crs
	vs := h.k.check(h.cur, snap)
	var out []string
	for _, v := range vs {
		h.t.Log(v)
		out = append(out, v.Invariant)
	}
	return out
}

func expect(t *testing.T, got []string, want ...string) {
	t.Helper()
	slices.Sort(got)
	got = slices.Compact(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("reported %v, want %v", got, want)
	}
}

func TestCheckerCleanRemediation(t *testing.T) {
	h := newHistory(t)
	h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionUnknown, 0) })
	expect(t, h.check())
	h.step(func(s *state) { s.Now = s.Now.Add(30 * time.Second) })
	first := h.cr("w01", "workers", 10)
	expect(t, h.check())
	h.step(nil)
	first.TimedOut = h.rv - 50
	h.cr("w01", "workers", 60) // the next escalation step
	expect(t, h.check())
	h.step(func(s *state) { h.recover(s, "w01") })
	for _, c := range h.crs {
		c.Deleted = h.rv - 10
	}
	expect(t, h.check())
	h.step(nil)
	expect(t, h.check())
}

func TestCheckerUnwarrantedCR(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(h *history, s *state)
		node  string
		owner string
	}{
		{"healthy node", func(h *history, s *state) {}, "w01", "workers"},
		{"too soon", func(h *history, s *state) { h.fail(s, "w01", corev1.ConditionFalse, 20*time.Second) }, "w01", "workers"},
		{"not selected", func(h *history, s *state) { h.fail(s, "w10", corev1.ConditionFalse, time.Hour) }, "w10", "workers"},
		{"excluded", func(h *history, s *state) {
			h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
			n := s.Nodes["w01"]
			n.Excluded = true
			s.Nodes["w01"] = n
		}, "w01", "workers"},
		{"paused", func(h *history, s *state) {
			h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
			s.NHCs["workers"].Spec.PauseRequests = []string{"x"}
		}, "w01", "workers"},
		{"missing template", func(h *history, s *state) {
			h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
			templateConfigs[5].apply(&s.NHCs["workers"].Spec)
		}, "w01", "workers"},
		{"not a NodeHealthCheck of the world", func(h *history, s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) }, "w01", "stranger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistory(t)
			h.step(func(s *state) { tc.setup(h, s) })
			expect(t, h.check())
			h.step(nil)
			h.cr(tc.node, tc.owner, 10)
			expect(t, h.check(), invUnwarranted)
		})
	}
	t.Run("an escalation step for a node healthy throughout the step", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		first := h.cr("w01", "workers", 10)
		expect(t, h.check())
		h.step(func(s *state) { h.recover(s, "w01") })
		expect(t, h.check())
		h.step(nil)
		first.TimedOut = h.rv - 90
		h.cr("w01", "workers", 20)
		expect(t, h.check(), invUnwarranted, invLeftCR)
	})
	t.Run("due before the step is enough (cache lag)", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		expect(t, h.check())
		h.step(func(s *state) {
			n := s.Nodes["w01"]
			n.Excluded = true
			s.Nodes["w01"] = n
		})
		h.cr("w01", "workers", 10)
		expect(t, h.check())
	})
}

func TestCheckerBudget(t *testing.T) {
	// workers selects w01..w09; 60% of 9 rounds up to 6 healthy: at most 3 remediated.
	h := newHistory(t)
	h.step(func(s *state) {
		for _, n := range []string{"w01", "w02", "w03", "w04"} {
			h.fail(s, n, corev1.ConditionFalse, time.Hour)
		}
	})
	for i, n := range []string{"w01", "w02", "w03"} {
		h.cr(n, "workers", uint64(10+i))
	}
	expect(t, h.check())
	h.step(nil)
	h.cr("w04", "workers", 10)
	expect(t, h.check(), invBudget)
}

func TestCheckerBudgetMaxUnhealthy(t *testing.T) {
	// pool-b selects w07..w09 and cp3; maxUnhealthy 50% of 4 is 2.
	h := newHistory(t)
	h.step(func(s *state) {
		for _, n := range []string{"w07", "w08", "w09"} {
			h.fail(s, n, corev1.ConditionFalse, time.Hour)
		}
	})
	h.cr("w07", "pool-b", 10)
	h.cr("w08", "pool-b", 20)
	expect(t, h.check())
	h.step(nil)
	h.cr("w09", "pool-b", 10)
	expect(t, h.check(), invBudget)
}

func TestCheckerOneNHCPerNode(t *testing.T) {
	h := newHistory(t)
	h.step(func(s *state) { h.fail(s, "w07", corev1.ConditionFalse, time.Hour) })
	h.cr("w07", "workers", 10)
	h.cr("w07", "pool-b", 20)
	expect(t, h.check(), invOneNHC)
}

func TestCheckerOneControlPlaneNode(t *testing.T) {
	h := newHistory(t)
	h.step(func(s *state) {
		h.fail(s, "cp1", corev1.ConditionFalse, time.Hour)
		h.fail(s, "cp3", corev1.ConditionFalse, time.Hour)
	})
	h.cr("cp1", "control-plane", 10)
	h.cr("cp3", "pool-b", 20)
	expect(t, h.check(), invOneControlPlane)
}

func TestCheckerOneRemediatorPerNode(t *testing.T) {
	h := newHistory(t)
	h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
	h.cr("w01", "workers", 10)
	expect(t, h.check())
	h.step(nil)
	h.cr("w01", "workers", 10) // the first neither timed out nor failed
	expect(t, h.check(), invOneRemediator)
}

func TestCheckerLeftBehind(t *testing.T) {
	t.Run("CR of a recovered node", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		h.cr("w01", "workers", 10)
		expect(t, h.check())
		h.step(func(s *state) { h.recover(s, "w01") })
		expect(t, h.check()) // it may take the step
		h.step(nil)
		expect(t, h.check(), invLeftCR)
		h.step(nil)
		expect(t, h.check()) // reported once
	})
	t.Run("healthyDelay keeps the CR until it passed", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w07", corev1.ConditionFalse, time.Hour) })
		h.cr("w07", "pool-b", 10)
		expect(t, h.check())
		h.step(func(s *state) { h.recover(s, "w07") })
		expect(t, h.check())
		h.step(func(s *state) { s.Now = s.Now.Add(59 * time.Second) })
		expect(t, h.check())
		h.step(func(s *state) { s.Now = s.Now.Add(time.Second) })
		expect(t, h.check()) // the delay passed in this step
		h.step(nil)
		expect(t, h.check(), invLeftCR)
	})
	t.Run("CR of a deleted node", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		h.cr("w01", "workers", 10)
		expect(t, h.check())
		h.step(func(s *state) {
			n := s.Nodes["w01"]
			n.Exists = false
			s.Nodes["w01"] = n
		})
		expect(t, h.check())
		h.step(nil)
		expect(t, h.check(), invLeftCR)
	})
	t.Run("CR of a node no longer selected", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		h.cr("w01", "workers", 10)
		expect(t, h.check())
		h.step(func(s *state) {
			n := s.Nodes["w01"]
			n.Pool = ""
			s.Nodes["w01"] = n
		})
		expect(t, h.check())
		h.step(nil)
		expect(t, h.check(), invLeftCR)
	})
	t.Run("lease of a healthy node", func(t *testing.T) {
		h := newHistory(t)
		h.step(nil)
		expect(t, h.check(leaseInfo{Node: "w01", Holder: "NodeHealthCheck-workers", Expires: t0.Add(time.Hour)}), invLeftLease)
	})
	t.Run("a maintenance lease is not ours", func(t *testing.T) {
		h := newHistory(t)
		h.step(nil)
		expect(t, h.check(leaseInfo{Node: "w01", Holder: "node-maintenance", Expires: t0.Add(time.Hour)}))
	})
}

func TestCheckerLiveness(t *testing.T) {
	h := newHistory(t)
	h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
	expect(t, h.check())
	h.step(nil)
	expect(t, h.check())
	h.step(nil)
	expect(t, h.check(), invLiveness)

	t.Run("not owed while another NodeHealthCheck remediates the node", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w07", corev1.ConditionFalse, time.Hour) })
		h.cr("w07", "pool-b", 10)
		for range 3 {
			expect(t, h.check())
			h.step(nil)
		}
	})
	t.Run("not owed over the budget", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) {
			for _, n := range []string{"w01", "w02", "w03", "w04"} {
				h.fail(s, n, corev1.ConditionFalse, time.Hour)
			}
		})
		for range 3 {
			expect(t, h.check())
			h.step(nil)
		}
	})
	t.Run("steps after API faults count once a fault-free step poked", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		expect(t, h.checkSnapshot(snapshot{Settled: true, Faulty: true}))
		for range 3 {
			h.step(nil)
			expect(t, h.check()) // a failed reconcile may wait for its backoff
		}
		h.step(nil)
		expect(t, h.checkSnapshot(snapshot{Settled: true, Poked: true}))
		h.step(nil)
		expect(t, h.check())
		h.step(nil)
		expect(t, h.check(), invLiveness)
	})
	t.Run("unsettled steps do not count", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		expect(t, h.check())
		h.step(nil)
		expect(t, h.check())
		h.step(nil)
		expect(t, h.checkSnapshot(snapshot{}))
		h.step(nil)
		expect(t, h.check())
	})
	t.Run("not owed while its lease is held by someone else", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		for range 3 {
			expect(t, h.check(leaseInfo{Node: "w01", Holder: "node-maintenance", Expires: h.cur.Now.Add(time.Minute)}))
			h.step(nil)
		}
	})
}
