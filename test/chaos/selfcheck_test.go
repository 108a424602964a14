package chaos

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
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
	// leases are the node leases of every check that names none.
	leases []leaseInfo
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

// cr records a CR of the NodeHealthCheck's first step created in the current step (offset orders
// CRs within the step).
func (h *history) cr(node, owner string, offset uint64) *crRecord {
	template := ""
	if n := h.cur.NHCs[owner]; n != nil {
		template = n.firstStep()
	}
	return h.crOf(node, owner, template, offset)
}

// crOf records a CR of the template created in the current step.
func (h *history) crOf(node, owner, template string, offset uint64) *crRecord {
	c := &crRecord{UID: types.UID(node + "-" + owner + "-" + string(rune('a'+len(h.crs)))), Kind: "TestRemediation", Name: node,
		Node: node, Owner: owner, OwnerUID: types.UID(owner), Template: template, Created: h.rv - 100 + offset,
		CreatedAt: h.cur.Now.Add(time.Duration(offset) * time.Millisecond)}
	h.crs = append(h.crs, c)
	return c
}

// check runs the checker on the current step and returns the invariants it reports.
func (h *history) check(leases ...leaseInfo) []string {
	if leases == nil {
		leases = h.leases
	}
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
	h.crOf("w01", "workers", "esc-2", 60) // the next escalation step
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
		h.crOf("w01", "workers", "esc-2", 20)
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
	h.crOf("w01", "workers", "esc-2", 10) // the first neither timed out nor failed
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

// setNode changes a node of the state.
func setNode(s *state, name string, change func(n *node)) {
	n := s.Nodes[name]
	change(&n)
	s.Nodes[name] = n
}

// gateClosers close the gate of workers' new remediations for w01 in a state.
var gateClosers = []struct {
	name  string
	close func(h *history, s *state)
}{
	{"paused", func(h *history, s *state) { s.NHCs["workers"].Spec.PauseRequests = []string{"x"} }},
	{"threshold", func(h *history, s *state) {
		// 9 selected, 60%: 6 must be healthy; w01..w04 are not.
		for _, n := range []string{"w02", "w03", "w04"} {
			h.fail(s, n, corev1.ConditionFalse, time.Hour)
		}
	}},
	{"returning nodes", func(h *history, s *state) {
		// 8 healthy, but 3 of them came back 10s ago: 5 healthy that did not just come back.
		for _, name := range []string{"w02", "w03", "w04"} {
			setNode(s, name, func(n *node) { n.Since, n.Created = s.Now.Add(-10*time.Second), s.Now.Add(-time.Hour) })
		}
	}},
	{"clock skew", func(h *history, s *state) { s.Skew = 5 * time.Minute }},
	{"missing template", func(h *history, s *state) { templateConfigs[5].apply(&s.NHCs["workers"].Spec) }},
	{"excluded", func(h *history, s *state) { setNode(s, "w01", func(n *node) { n.Excluded = true }) }},
	{"being removed", func(h *history, s *state) {
		setNode(s, "w01", func(n *node) { n.RemovedBy, n.RemovalSince = "karpenter", s.Now.Add(-time.Minute) })
	}},
	{"maintenance lease", func(h *history, s *state) {
		setNode(s, "w01", func(n *node) { n.Maintained, n.LeasedUntil = true, s.Now.Add(time.Minute) })
		h.leases = []leaseInfo{{Node: "w01", Holder: maintenanceHolder, Expires: s.Now.Add(time.Minute)}}
	}},
}

func TestCheckerNoEscalationWhileHeld(t *testing.T) {
	for _, tc := range gateClosers {
		for _, escalation := range []string{"a next-step CR", "a timed-out mark"} {
			t.Run(tc.name+": "+escalation, func(t *testing.T) {
				h := newHistory(t)
				h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
				first := h.cr("w01", "workers", 10)
				expect(t, h.check())
				h.step(func(s *state) { tc.close(h, s) })
				expect(t, h.check())
				h.step(nil)
				first.TimedOut = h.rv - 50
				if escalation == "a next-step CR" {
					h.crOf("w01", "workers", "esc-2", 60)
				}
				expect(t, h.check(), invHeld)
			})
		}
	}
	t.Run("the gate opens in the step (cache lag)", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		first := h.cr("w01", "workers", 10)
		expect(t, h.check())
		h.step(func(s *state) { s.NHCs["workers"].Spec.PauseRequests = []string{"x"} })
		expect(t, h.check())
		h.step(func(s *state) { s.NHCs["workers"].Spec.PauseRequests = nil })
		first.TimedOut = h.rv - 50
		h.crOf("w01", "workers", "esc-2", 60)
		expect(t, h.check())
	})
	t.Run("a burst opens the gate between its moves", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		first := h.cr("w01", "workers", 10)
		expect(t, h.check())
		h.step(func(s *state) { s.Skew = 5 * time.Minute })
		expect(t, h.check())
		h.step(func(s *state) {
			mid := s.clone()
			mid.Skew = 0
			s.Mids = []*state{mid}
		})
		first.TimedOut = h.rv - 50
		h.crOf("w01", "workers", "esc-2", 60)
		expect(t, h.check())
	})
}

func TestCheckerNoCRDeleted(t *testing.T) {
	// w01 remediated by workers with template (config) and its CR, in step 1.
	remediated := func(t *testing.T, config int) (*history, *crRecord) {
		h := newHistory(t)
		h.step(func(s *state) {
			h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
			templateConfigs[config].apply(&s.NHCs["workers"].Spec)
			s.NHCs["workers"].Config = config
		})
		c := h.cr("w01", "workers", 10)
		expect(t, h.check())
		return h, c
	}
	t.Run("a CR of an unhealthy selected node", func(t *testing.T) {
		h, c := remediated(t, 3)
		h.step(nil)
		c.Deleted = h.rv - 50
		expect(t, h.check(), invDeleted)
	})
	t.Run("a CR of a node that recovered in the step", func(t *testing.T) {
		h, c := remediated(t, 3)
		h.step(func(s *state) { h.recover(s, "w01") })
		c.Deleted = h.rv - 50
		expect(t, h.check())
	})
	t.Run("a CR of a node not selected between the moves of a burst", func(t *testing.T) {
		h, c := remediated(t, 3)
		h.step(func(s *state) {
			mid := s.clone()
			setNode(mid, "w01", func(n *node) { n.Pool = "" })
			s.Mids = []*state{mid}
		})
		c.Deleted = h.rv - 50
		expect(t, h.check())
	})
	t.Run("a timed-out CR whose name the next step needs", func(t *testing.T) {
		h, c := remediated(t, 0) // plain-1, named after the node
		h.step(func(s *state) {
			templateConfigs[1].apply(&s.NHCs["workers"].Spec) // plain-2: the same kind and name
			s.NHCs["workers"].Config = 1
		})
		c.TimedOut, c.Deleted = h.rv-60, h.rv-50
		h.crOf("w01", "workers", "plain-2", 70)
		expect(t, h.check())
	})
	t.Run("a timed-out CR whose name no step needs", func(t *testing.T) {
		h, c := remediated(t, 3) // esc-1: generated names
		h.step(nil)
		c.TimedOut, c.Deleted = h.rv-60, h.rv-50
		expect(t, h.check(), invDeleted)
	})
	t.Run("a CR whose name the next step needs, deleted before it timed out", func(t *testing.T) {
		h, c := remediated(t, 0)
		h.step(func(s *state) {
			templateConfigs[1].apply(&s.NHCs["workers"].Spec)
			s.NHCs["workers"].Config = 1
		})
		c.Deleted = h.rv - 50
		expect(t, h.check(), invDeleted)
	})
}

func TestCheckerOneFirstStepPerFailure(t *testing.T) {
	failed := func(t *testing.T) (*history, *crRecord) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		c := h.cr("w01", "workers", 10)
		expect(t, h.check())
		return h, c
	}
	t.Run("two first steps in one failure", func(t *testing.T) {
		h, c := failed(t)
		h.step(nil)
		expect(t, h.check())
		h.step(nil)
		c.TimedOut = h.rv - 60
		h.cr("w01", "workers", 70)
		expect(t, h.check(), invFirstStep)
	})
	t.Run("two first steps in one step", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		c := h.cr("w01", "workers", 10)
		c.TimedOut = h.rv - 60
		h.cr("w01", "workers", 70)
		expect(t, h.check(), invFirstStep)
	})
	t.Run("a new failure", func(t *testing.T) {
		h, c := failed(t)
		h.step(func(s *state) { h.recover(s, "w01") })
		c.Deleted = h.rv - 50
		expect(t, h.check())
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		h.cr("w01", "workers", 10)
		expect(t, h.check())
	})
	t.Run("recovered and failed again between the moves of a burst", func(t *testing.T) {
		h, c := failed(t)
		h.step(func(s *state) {
			mid := s.clone()
			h.recover(mid, "w01")
			s.Mids = []*state{mid}
			h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
		})
		c.Deleted = h.rv - 50
		h.cr("w01", "workers", 70)
		expect(t, h.check())
	})
	t.Run("the templates changed in between", func(t *testing.T) {
		h, c := failed(t)
		h.step(func(s *state) {
			templateConfigs[7].apply(&s.NHCs["workers"].Spec)
			s.NHCs["workers"].Config = 7
		})
		expect(t, h.check())
		h.step(func(s *state) {
			templateConfigs[3].apply(&s.NHCs["workers"].Spec)
			s.NHCs["workers"].Config = 3
		})
		c.TimedOut = h.rv - 60
		h.cr("w01", "workers", 70)
		expect(t, h.check())
	})
	t.Run("not selected in between", func(t *testing.T) {
		h, c := failed(t)
		h.step(func(s *state) { setNode(s, "w01", func(n *node) { n.Pool = "" }) })
		c.Deleted = h.rv - 50
		expect(t, h.check())
		h.step(func(s *state) { setNode(s, "w01", func(n *node) { n.Pool = "a" }) })
		h.cr("w01", "workers", 10)
		expect(t, h.check())
	})
}

func TestCheckerRepairBudget(t *testing.T) {
	// workers: at most 2 remediations of a node within 24h. remediate fails w01, remediates it and
	// brings it back, over three steps.
	remediate := func(h *history, deletedAtOnce bool) *crRecord {
		if deletedAtOnce {
			// A burst: the node fails, is remediated and recovers; no check saw the CR.
			h.step(func(s *state) {
				mid := s.clone()
				h.fail(mid, "w01", corev1.ConditionFalse, time.Hour)
				s.Mids = []*state{mid}
				h.recover(s, "w01")
			})
			c := h.cr("w01", "workers", 10)
			c.Deleted = h.rv - 50
			expect(h.t, h.check())
			h.step(func(s *state) { s.Now = s.Now.Add(time.Minute) })
			expect(h.t, h.check())
			return c
		}
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		c := h.cr("w01", "workers", 10)
		expect(h.t, h.check())
		h.step(func(s *state) { h.recover(s, "w01") })
		c.Deleted = h.rv - 50
		expect(h.t, h.check())
		h.step(func(s *state) { s.Now = s.Now.Add(time.Minute) })
		expect(h.t, h.check())
		return c
	}
	t.Run("a third remediation", func(t *testing.T) {
		h := newHistory(t)
		remediate(h, false)
		remediate(h, false)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		h.cr("w01", "workers", 10)
		expect(t, h.check(), invRepairBudget)
	})
	t.Run("a third remediation after a reset", func(t *testing.T) {
		h := newHistory(t)
		remediate(h, false)
		second := remediate(h, false)
		h.step(func(s *state) {
			h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
			setNode(s, "w01", func(n *node) { n.ResetAt = second.CreatedAt })
		})
		h.cr("w01", "workers", 1010)
		expect(t, h.check())
	})
	t.Run("a remediation no check saw running", func(t *testing.T) {
		h := newHistory(t)
		remediate(h, false)
		remediate(h, true)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		h.cr("w01", "workers", 10)
		expect(t, h.check())
	})
	t.Run("a third remediation after the node left the pool and came back", func(t *testing.T) {
		h := newHistory(t)
		remediate(h, false)
		remediate(h, false)
		h.step(func(s *state) { setNode(s, "w01", func(n *node) { n.Pool = "" }) })
		expect(t, h.check())
		h.step(func(s *state) {
			setNode(s, "w01", func(n *node) { n.Pool = "a" })
			h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
		})
		h.cr("w01", "workers", 10)
		expect(t, h.check())
	})
	t.Run("not owed while the budget may be exhausted", func(t *testing.T) {
		h := newHistory(t)
		remediate(h, false)
		remediate(h, false)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		for range livenessSteps {
			expect(t, h.check())
			h.step(nil)
		}
	})
}

func TestCheckerDryRun(t *testing.T) {
	for _, template := range []string{"esc-1", "esc-2"} {
		t.Run("a CR from "+template, func(t *testing.T) {
			h := newHistory(t)
			h.step(func(s *state) {
				h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
				s.NHCs["workers"].Spec.DryRun = true
			})
			for range livenessSteps {
				expect(t, h.check()) // not owed either
				h.step(nil)
			}
			h.crOf("w01", "workers", template, 10)
			if template == "esc-2" { // not the first step: an escalation as well
				expect(t, h.check(), invUnwarranted, invHeld)
				return
			}
			expect(t, h.check(), invUnwarranted)
		})
	}
	t.Run("a running CR marked timed out", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		first := h.cr("w01", "workers", 10)
		expect(t, h.check())
		h.step(func(s *state) { s.NHCs["workers"].Spec.DryRun = true })
		expect(t, h.check())
		h.step(nil)
		first.TimedOut = h.rv - 50
		expect(t, h.check(), invHeld)
	})
	t.Run("turned off in the step", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) {
			h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
			s.NHCs["workers"].Spec.DryRun = true
		})
		expect(t, h.check())
		h.step(func(s *state) { s.NHCs["workers"].Spec.DryRun = false })
		h.cr("w01", "workers", 10)
		expect(t, h.check())
	})
}

func TestCheckerBurst(t *testing.T) {
	for _, due := range []bool{true, false} {
		h := newHistory(t)
		h.step(func(s *state) {
			// Excluded before and after the burst; due between its moves, or not.
			setNode(s, "w01", func(n *node) { n.Excluded = true })
			mid := s.clone()
			h.fail(mid, "w01", corev1.ConditionFalse, time.Hour)
			setNode(mid, "w01", func(n *node) { n.Excluded = !due })
			s.Mids = []*state{mid}
			h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
		})
		h.cr("w01", "workers", 10)
		if due {
			expect(t, h.check())
		} else {
			expect(t, h.check(), invUnwarranted)
		}
	}
}

func TestCheckerPausedKeepsOrphans(t *testing.T) {
	h := newHistory(t)
	h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
	h.cr("w01", "workers", 10)
	expect(t, h.check())
	h.step(func(s *state) {
		s.NHCs["workers"].Spec.PauseRequests = []string{"x"}
		setNode(s, "w01", func(n *node) { n.Pool = "" })
	})
	for range 3 {
		expect(t, h.check()) // kept while paused
		h.step(nil)
	}
	h.step(func(s *state) { s.NHCs["workers"].Spec.PauseRequests = nil })
	expect(t, h.check()) // resumed in this step
	h.step(nil)
	expect(t, h.check(), invLeftCR)
}

func TestCheckerLivenessHolds(t *testing.T) {
	for _, tc := range gateClosers {
		if tc.name == "excluded" || tc.name == "paused" || tc.name == "missing template" || tc.name == "threshold" {
			continue // not due or over the budget: covered above
		}
		t.Run("not owed while "+tc.name, func(t *testing.T) {
			h := newHistory(t)
			h.step(func(s *state) {
				h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
				tc.close(h, s)
			})
			for range livenessSteps {
				expect(t, h.check())
				h.step(nil)
			}
		})
	}
}

func TestCheckerForeignLease(t *testing.T) {
	h := newHistory(t)
	h.step(func(s *state) {
		setNode(s, "w01", func(n *node) { n.Maintained, n.LeasedUntil = true, s.Now.Add(time.Minute) })
	})
	held := leaseInfo{Node: "w01", Holder: maintenanceHolder, Expires: h.cur.Now.Add(time.Minute)}
	expect(t, h.check(held))
	h.step(nil)
	expect(t, h.check(), invForeignLease) // deleted
	h.step(nil)
	expect(t, h.check(leaseInfo{Node: "w01", Holder: "NodeHealthCheck-workers", Expires: h.cur.Now.Add(time.Minute)}), invForeignLease, invLeftLease)
	h.step(func(s *state) { s.Now = s.Now.Add(time.Minute) })
	expect(t, h.check()) // expired: anyone may take it
}

func TestCheckerMachineOwner(t *testing.T) {
	t.Run("its own Machine owns the CR", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "cp1", corev1.ConditionFalse, time.Hour) })
		c := h.cr("cp1", "control-plane", 10)
		c.Machines, c.ControlPlane = []string{machineOf("cp1")}, true
		expect(t, h.check())
	})
	t.Run("the Machine a forged claim names owns the CR", func(t *testing.T) {
		h := newHistory(t) // w06 claims m-cp1
		h.step(func(s *state) { h.fail(s, "w06", corev1.ConditionFalse, time.Hour) })
		h.cr("w06", "workers", 10).Machines = []string{machineOf("cp1")}
		expect(t, h.check(), invMachine)
	})
	t.Run("a forged claim labels a worker's CR control-plane", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w06", corev1.ConditionFalse, time.Hour) })
		h.cr("w06", "workers", 10).ControlPlane = true
		expect(t, h.check(), invMachine)
	})
	t.Run("a node that claims another node's Machine gets a CR without a Machine owner", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w06", corev1.ConditionFalse, time.Hour) })
		h.cr("w06", "workers", 10)
		expect(t, h.check())
	})
}

func TestCheckerInFlight(t *testing.T) {
	one := intstr.FromInt32(1)
	h := newHistory(t)
	h.step(func(s *state) {
		s.NHCs["workers"].Spec.MaxInFlight = &one
		h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
		h.fail(s, "w02", corev1.ConditionFalse, time.Hour)
	})
	h.cr("w01", "workers", 10)
	expect(t, h.check())
	// w02 waits for w01's remediation: not owed meanwhile.
	for range livenessSteps {
		h.step(nil)
		expect(t, h.check())
	}
	h.step(nil)
	h.cr("w02", "workers", 10)
	expect(t, h.check(), invInFlight)

	// Once w01 is back (its CR still there), w02 may start.
	h = newHistory(t)
	h.step(func(s *state) {
		s.NHCs["workers"].Spec.MaxInFlight = &one
		h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
		h.fail(s, "w02", corev1.ConditionFalse, time.Hour)
	})
	h.cr("w01", "workers", 10)
	expect(t, h.check())
	h.step(func(s *state) {
		setNode(s, "w01", func(n *node) { n.Ready, n.Since, n.HealthyFrom = corev1.ConditionTrue, s.Now, s.Step })
	})
	h.cr("w02", "workers", 10)
	expect(t, h.check())

	// A remediation whose steps are exhausted (its last CR failed) holds no slot, though its node is
	// still down and its CRs are kept.
	h = newHistory(t)
	h.step(func(s *state) {
		s.NHCs["workers"].Spec.MaxInFlight = &one
		h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
		h.fail(s, "w02", corev1.ConditionFalse, time.Hour)
	})
	exhausted := h.cr("w01", "workers", 10)
	expect(t, h.check())
	h.step(nil)
	exhausted.Failed = h.rv - 90
	h.cr("w02", "workers", 20)
	expect(t, h.check())
}

func TestCheckerFailureDomain(t *testing.T) {
	h := newHistory(t)
	h.step(func(s *state) {
		s.NHCs["workers"].Spec.FailureDomain = &remediationv1alpha1.FailureDomain{TopologyKey: poolLabel, MaxUnhealthy: intstr.FromInt32(1)}
		for _, name := range []string{"w01", "w02"} {
			setNode(s, name, func(n *node) { n.Pool = "a" })
			h.fail(s, name, corev1.ConditionFalse, time.Hour)
		}
	})
	// Two of pool a down: neither is owed, and a CR for either breaks the bound.
	for range livenessSteps {
		expect(t, h.check())
		h.step(nil)
	}
	h.cr("w01", "workers", 10)
	expect(t, h.check(), invFailureDomain)
}

func TestCheckerBackdated(t *testing.T) {
	// A slow writer dates w01's failure 45s back; workers' Unknown lasts 30s.
	slow := func(s *state) {
		setNode(s, "w01", func(n *node) {
			n.Ready, n.Since, n.Written, n.WrittenManagers, n.HealthyFrom = corev1.ConditionUnknown, s.Now.Add(-45*time.Second), s.Now, s.Managers, s.Step
		})
	}
	t.Run("remediated as soon as it is written", func(t *testing.T) {
		h := newHistory(t)
		h.step(slow)
		h.cr("w01", "workers", 10)
		expect(t, h.check(), invBackdated)
	})
	t.Run("remediated before its duration since it was written", func(t *testing.T) {
		h := newHistory(t)
		h.step(slow)
		expect(t, h.check())
		h.step(func(s *state) { s.Now = s.Now.Add(29 * time.Second) })
		h.cr("w01", "workers", 10)
		expect(t, h.check(), invBackdated)
	})
	t.Run("remediated once its duration passed since it was written", func(t *testing.T) {
		h := newHistory(t)
		h.step(slow)
		expect(t, h.check())
		h.step(func(s *state) { s.Now = s.Now.Add(30 * time.Second) })
		h.cr("w01", "workers", 10)
		expect(t, h.check())
	})
	t.Run("a manager started since the write trusts its time", func(t *testing.T) {
		h := newHistory(t)
		h.step(slow)
		expect(t, h.check())
		h.step(func(s *state) { s.Managers++ })
		h.cr("w01", "workers", 10)
		expect(t, h.check())
	})
	t.Run("written within the bound", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) {
			slow(s)
			setNode(s, "w01", func(n *node) { n.Since = n.Written.Add(-maxClockSkew) })
		})
		expect(t, h.check())
		h.step(func(s *state) { s.Now = s.Now.Add(20 * time.Second) }) // 30s since it is dated
		h.cr("w01", "workers", 10)
		expect(t, h.check())
	})
	t.Run("not owed before the leader's watch certainly showed it", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) {
			h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
			setNode(s, "w01", func(n *node) { n.SeenBy = time.Time{} })
		})
		for range livenessSteps {
			expect(t, h.check())
			h.step(nil)
		}
	})
}

func TestCheckerRemoval(t *testing.T) {
	removed := func(how string, ago time.Duration) func(s *state) {
		return func(s *state) {
			setNode(s, "w01", func(n *node) {
				n.Ready, n.Since, n.HealthyFrom = corev1.ConditionFalse, s.Now.Add(-time.Hour), s.Step
				n.RemovedBy, n.RemovalSince = how, s.Now.Add(-ago)
			})
		}
	}
	for _, how := range []string{"autoscaler", "karpenter", "deletion"} {
		t.Run("a start within the hold: "+how, func(t *testing.T) {
			h := newHistory(t)
			h.step(removed(how, 29*time.Minute))
			expect(t, h.check())
			h.step(nil)
			h.cr("w01", "workers", 10)
			expect(t, h.check(), invRemoval)
		})
	}
	t.Run("a start in the step that gave the removal up (cache lag)", func(t *testing.T) {
		h := newHistory(t)
		h.step(removed("autoscaler", time.Minute))
		expect(t, h.check())
		h.step(func(s *state) { setNode(s, "w01", func(n *node) { n.RemovedBy, n.RemovalSince = "", time.Time{} }) })
		h.cr("w01", "workers", 10)
		expect(t, h.check())
	})
	t.Run("a start after the hold", func(t *testing.T) {
		h := newHistory(t)
		h.step(removed("autoscaler", 29*time.Minute))
		expect(t, h.check())
		h.step(func(s *state) { s.Now = s.Now.Add(time.Minute) })
		h.cr("w01", "workers", 10)
		expect(t, h.check())
	})
	t.Run("a NodeHealthCheck that does not skip nodes being removed", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) {
			removed("deletion", time.Minute)(s)
			s.NHCs["workers"].Spec.SkipNodesBeingRemoved = false
		})
		expect(t, h.check())
		h.step(nil)
		h.cr("w01", "workers", 10)
		expect(t, h.check())
	})
	t.Run("owed once the hold has ended", func(t *testing.T) {
		h := newHistory(t)
		h.step(removed("autoscaler", 40*time.Minute))
		expect(t, h.check())
		h.step(nil)
		expect(t, h.check())
		h.step(nil)
		expect(t, h.check(), invLiveness)
	})
	t.Run("not owed while a new leader may have seen Karpenter's taint only lately", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) {
			removed("karpenter", 40*time.Minute)(s)
			s.LeaderSince = s.Now.Add(-time.Minute)
		})
		for range livenessSteps {
			expect(t, h.check())
			h.step(nil)
		}
	})
}

// request writes the node's request of the kind in the state, as the driver does.
func request(s *state, name, kind string) {
	setNode(s, name, func(n *node) {
		n.Request, n.RequestAt, n.RequestStep = kind, time.Time{}, s.Step
		if d, ok := requestTimes[kind]; ok {
			n.RequestAt = s.Now.Add(d)
		}
	})
}

// requestCR records a first CR of the NodeHealthCheck answering the request dated at.
func (h *history) requestCR(node, owner string, at time.Time, offset uint64) *crRecord {
	c := h.cr(node, owner, offset)
	c.RequestedAt, c.RequestValue = at, at.UTC().Format(time.RFC3339)
	return c
}

func TestCheckerRequests(t *testing.T) {
	for _, tc := range []struct {
		name, node, owner, kind string
		want                    []string
	}{
		{"a request dated now", "w01", "workers", "now", nil},
		{"a request dated beyond the bound", "w01", "workers", "future", []string{invRequestRefused, invUnwarranted}},
		{"a request dated a moment ahead, before its time", "w01", "workers", "ahead", []string{invRequestRefused, invUnwarranted}},
		{"an expired request", "w01", "workers", "old", []string{invRequestRefused, invUnwarranted}},
		{"a request that is not a time", "w01", "workers", "junk", []string{invRequestRefused, invUnwarranted}},
		{"a request where requests are not taken", "cp1", "control-plane", "now", []string{invRequestRefused, invUnwarranted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistory(t)
			h.step(func(s *state) { request(s, tc.node, tc.kind) })
			at := h.cur.Nodes[tc.node].RequestAt
			if at.IsZero() {
				at = h.cur.Now
			}
			h.requestCR(tc.node, tc.owner, at, 10)
			expect(t, h.check(), tc.want...)
		})
	}
	t.Run("a request dated a moment ahead, at its time", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { request(s, "w01", "ahead") })
		expect(t, h.check())
		h.step(func(s *state) { s.Now = s.Now.Add(5 * time.Second) })
		h.requestCR("w01", "workers", h.cur.Nodes["w01"].RequestAt, 10)
		expect(t, h.check())
	})
	t.Run("answered twice", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { request(s, "w01", "now") })
		at := h.cur.Nodes["w01"].RequestAt
		c := h.requestCR("w01", "workers", at, 10)
		expect(t, h.check())
		h.step(func(s *state) { s.Now = s.Now.Add(time.Minute) })
		c.Deleted = h.rv - 50
		expect(t, h.check())
		h.step(nil)
		h.requestCR("w01", "workers", at, 10)
		expect(t, h.check(), invRequestOnce)
	})
	t.Run("a later request answered again", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { request(s, "w01", "now") })
		c := h.requestCR("w01", "workers", h.cur.Now, 10)
		expect(t, h.check())
		h.step(func(s *state) { s.Now = s.Now.Add(time.Minute) })
		c.Deleted = h.rv - 50
		expect(t, h.check())
		h.step(func(s *state) { request(s, "w01", "now") })
		h.requestCR("w01", "workers", h.cur.Now, 10)
		expect(t, h.check())
	})
	t.Run("a request within the threshold's headroom", func(t *testing.T) {
		// workers: 6 of 9 must stay healthy; w01 and w02 are down and remediated, w04..w09 stay.
		h := newHistory(t)
		h.step(func(s *state) {
			for _, n := range []string{"w01", "w02"} {
				h.fail(s, n, corev1.ConditionFalse, time.Hour)
			}
		})
		for i, n := range []string{"w01", "w02"} {
			h.cr(n, "workers", uint64(10+i))
		}
		expect(t, h.check())
		h.step(func(s *state) { request(s, "w03", "now") })
		h.requestCR("w03", "workers", h.cur.Now, 10)
		expect(t, h.check())
	})
	t.Run("a request beyond the threshold's headroom", func(t *testing.T) {
		// workers: 6 of 9 must stay healthy; w01..w03 are down and remediated.
		h := newHistory(t)
		h.step(func(s *state) {
			for _, n := range []string{"w01", "w02", "w03"} {
				h.fail(s, n, corev1.ConditionFalse, time.Hour)
			}
		})
		for i, n := range []string{"w01", "w02", "w03"} {
			h.cr(n, "workers", uint64(10+i))
		}
		expect(t, h.check())
		h.step(func(s *state) { request(s, "w04", "now") })
		h.requestCR("w04", "workers", h.cur.Now, 10)
		expect(t, h.check(), invRequestThreshold, invBudget)
	})
	t.Run("a request ahead of a node that is down", func(t *testing.T) {
		one := intstr.FromInt32(1)
		h := newHistory(t)
		h.step(func(s *state) {
			s.NHCs["workers"].Spec.MaxInFlight = &one
			h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
		})
		expect(t, h.check())
		h.step(func(s *state) { request(s, "w02", "now") })
		h.requestCR("w02", "workers", h.cur.Now, 10)
		expect(t, h.check(), invRequestWaits)
	})
	t.Run("a request with a slot left beside a node that is down", func(t *testing.T) {
		two := intstr.FromInt32(2)
		h := newHistory(t)
		h.step(func(s *state) {
			s.NHCs["workers"].Spec.MaxInFlight = &two
			h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
		})
		expect(t, h.check())
		h.step(func(s *state) { request(s, "w02", "now") })
		h.requestCR("w02", "workers", h.cur.Now, 10)
		expect(t, h.check())
	})
	t.Run("a request owed, and kept while it runs on a healthy node", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) { request(s, "w01", "now") })
		expect(t, h.check())
		h.step(nil)
		expect(t, h.check())
		h.step(nil)
		expect(t, h.check(), invLiveness)

		h = newHistory(t)
		h.step(func(s *state) { request(s, "w01", "now") })
		h.requestCR("w01", "workers", h.cur.Now, 10)
		for range 3 {
			expect(t, h.check()) // not left behind: its remediator has not reported
			h.step(nil)
		}
		h.step(func(s *state) { setNode(s, "w01", func(n *node) { n.Writes++ }) }) // the node's conditions changed
		expect(t, h.check(), invLeftCR)
	})
	t.Run("a request waits for a node that is down", func(t *testing.T) {
		one := intstr.FromInt32(1)
		h := newHistory(t)
		h.step(func(s *state) {
			s.NHCs["workers"].Spec.MaxInFlight = &one
			h.fail(s, "w01", corev1.ConditionFalse, time.Hour)
			request(s, "w02", "now")
		})
		h.cr("w01", "workers", 10)
		for range livenessSteps {
			expect(t, h.check())
			h.step(nil)
		}
	})
}

func TestCheckerReplacedNode(t *testing.T) {
	// w01's CR, then w01 deleted and created again, not ready.
	replaced := func(t *testing.T) (*history, *crRecord) {
		h := newHistory(t)
		h.step(func(s *state) { h.fail(s, "w01", corev1.ConditionFalse, time.Hour) })
		c := h.cr("w01", "workers", 10)
		expect(t, h.check())
		h.step(func(s *state) {
			s.Now = s.Now.Add(time.Minute)
			mid := s.clone()
			setNode(mid, "w01", func(n *node) { n.Exists = false })
			s.Mids = []*state{mid}
			setNode(s, "w01", func(n *node) {
				n.Ready, n.Since, n.Created, n.CreatedStep, n.HealthyFrom = corev1.ConditionUnknown, s.Now, s.Now, s.Step, s.Step
			})
		})
		expect(t, h.check()) // the step that created it
		return h, c
	}
	t.Run("the previous object's CR kept", func(t *testing.T) {
		h, _ := replaced(t)
		h.step(nil)
		expect(t, h.check(), invReplaced)
	})
	t.Run("the previous object's CR escalated", func(t *testing.T) {
		h, c := replaced(t)
		h.step(nil)
		c.TimedOut = h.rv - 60
		h.crOf("w01", "workers", "esc-2", 70)
		expect(t, h.check(), invReplaced)
	})
	t.Run("the previous object's CR gone, the new node remediated", func(t *testing.T) {
		h, c := replaced(t)
		h.step(func(s *state) { s.Now = s.Now.Add(30 * time.Second) })
		c.Deleted = h.rv - 60
		h.cr("w01", "workers", 70).CreatedAt = h.cur.Now
		expect(t, h.check())
	})
	t.Run("the new node's own remediation escalated", func(t *testing.T) {
		h, c := replaced(t)
		h.step(func(s *state) { s.Now = s.Now.Add(30 * time.Second) })
		c.Deleted = h.rv - 60
		own := h.cr("w01", "workers", 70)
		own.CreatedAt = h.cur.Now
		expect(t, h.check())
		h.step(func(s *state) { s.Now = s.Now.Add(time.Minute) })
		own.TimedOut = h.rv - 60
		h.crOf("w01", "workers", "esc-2", 70)
		expect(t, h.check())
	})
}

func TestCheckerUnknownKind(t *testing.T) {
	// workers remediates w08 with conv-1; its kind becomes unreadable, then the leader changes.
	lease := leaseInfo{UID: "lease-w08", Node: "w08", Holder: leaseHolderPrefix + "workers", Expires: t0.Add(11 * time.Minute)}
	blind := func(t *testing.T) (*history, *crRecord) {
		h := newHistory(t)
		h.step(func(s *state) {
			templateConfigs[8].apply(&s.NHCs["workers"].Spec)
			s.NHCs["workers"].Config = 8
			h.fail(s, "w08", corev1.ConditionFalse, time.Hour)
		})
		c := h.cr("w08", "workers", 10)
		c.Kind = convKind
		expect(t, h.check(lease))
		h.step(func(s *state) { s.ConvDown, s.ConvLeases = true, map[string]leaseInfo{"w08": lease} })
		expect(t, h.check(lease))
		h.step(func(s *state) { s.ConvBlind = true })
		expect(t, h.check(lease))
		return h, c
	}
	t.Run("the lease kept, even expired", func(t *testing.T) {
		h, _ := blind(t)
		h.step(func(s *state) { s.Now = s.Now.Add(time.Hour) })
		expect(t, h.check(lease))
	})
	t.Run("the lease released", func(t *testing.T) {
		h, _ := blind(t)
		h.step(nil)
		expect(t, h.checkSnapshot(snapshot{Settled: true}), invUnknown)
	})
	t.Run("another NodeHealthCheck starts on the node", func(t *testing.T) {
		h, _ := blind(t)
		h.step(nil)
		h.cr("w08", "pool-b", 10)
		expect(t, h.check(lease), invUnknown, invOneNHC)
	})
	t.Run("a leader that read the kind before it went down may release the lease", func(t *testing.T) {
		h := newHistory(t)
		h.step(func(s *state) {
			templateConfigs[8].apply(&s.NHCs["workers"].Spec)
			s.NHCs["workers"].Config = 8
			h.fail(s, "w08", corev1.ConditionFalse, time.Hour)
		})
		h.cr("w08", "workers", 10).Kind = convKind
		expect(t, h.check(lease))
		h.step(func(s *state) { s.ConvDown, s.ConvLeases = true, map[string]leaseInfo{"w08": lease} })
		expect(t, h.check(lease))
		h.step(nil)
		expect(t, h.checkSnapshot(snapshot{Settled: true}))
	})
	t.Run("the CR and its lease may go once the kind is read again", func(t *testing.T) {
		h, c := blind(t)
		h.step(func(s *state) {
			s.ConvDown, s.ConvBlind, s.ConvLeases = false, false, nil
			h.recover(s, "w08")
		})
		c.Deleted = h.rv - 50
		expect(t, h.checkSnapshot(snapshot{Settled: true}))
	})
}
