package remediation_test

import (
	"bytes"
	"context"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	gomegatypes "github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/nhc"
	"github.com/medik8s/node-healthcheck/internal/explain"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// outcomesOf returns a function reading the outcomes the NodeHealthCheck's status records for the
// node, oldest first.
func outcomesOf(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, node string) func() []remediationv1alpha1.EndedRemediation {
	return func() []remediationv1alpha1.EndedRemediation {
		for _, r := range e.Status(ctx, n)().RemediationOutcomes {
			if r.Name == node {
				return r.Outcomes
			}
		}
		return nil
	}
}

// ended matches a recorded outcome of the remediation whose first CR is first, ended at the fake
// clock's time (the controllers' now; the specs do not move it after the end).
func ended(o remediationv1alpha1.RemediationOutcome, step int, template string, first unstructured.Unstructured) gomegatypes.GomegaMatcher {
	return MatchAllFields(Fields{
		"Outcome": Equal(o), "Step": Equal(step), "Template": Equal(template), "Started": Equal(first.GetCreationTimestamp()),
		"Ended": WithTransform(func(t metav1.Time) time.Time { return t.Time }, BeTemporally("==", e.Clock.Now().Truncate(time.Second))),
	})
}

// outcomeCount returns a function reading nodehealthcheck_remediation_outcomes_total for the
// NodeHealthCheck, outcome and step (0 without a series).
func outcomeCount(n *remediationv1alpha1.NodeHealthCheck, o remediationv1alpha1.RemediationOutcome, step int) func() float64 {
	return func() float64 {
		m := testutil.Series(nhc.MetricRemediationOutcomes, map[string]string{"nhc": n.Name, "outcome": string(o), "step": strconv.Itoa(step)})
		if m == nil {
			return 0
		}
		return m.GetCounter().GetValue()
	}
}

// outcomeTotal returns a function adding up every outcome counted for the NodeHealthCheck, with
// steps 1 to 3.
func outcomeTotal(n *remediationv1alpha1.NodeHealthCheck) func() float64 {
	return func() float64 {
		total := 0.0
		for _, o := range remediationv1alpha1.RemediationOutcomes {
			for step := 1; step <= 3; step++ {
				total += outcomeCount(n, o, step)()
			}
		}
		return total
	}
}

// deadlineOf returns a function reading the node's nodehealthcheck_remediation_deadline_timestamp_seconds
// series (-1: no series).
func deadlineOf(n *remediationv1alpha1.NodeHealthCheck, node string) func() float64 {
	return func() float64 {
		v, ok := gaugeValue(nhc.MetricRemediationDeadline, map[string]string{"nhc": n.Name, "node": node})
		if !ok {
			return -1
		}
		return v
	}
}

// explainedNode returns kubectl nhc explain node's answer.
func explainedNode(ctx context.Context, node string) string {
	var out bytes.Buffer
	Expect(explain.Node(ctx, e.K8s, node, explainOptions(), &out)).To(Succeed())
	return out.String()
}

// listedWith returns a function telling how many CRs status lists for the node (-1: not listed).
func listedWith(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, node string) func() int {
	return func() int {
		u := entryOf(ctx, n, node)()
		if u == nil {
			return -1
		}
		return len(u.Remediations)
	}
}

// remediatedOnce creates workers and a NodeHealthCheck, and returns once its status lists the sick
// node's first CR (returned).
func remediatedOnce(ctx context.Context) (string, *remediationv1alpha1.NodeHealthCheck, *corev1.Node, unstructured.Unstructured) {
	GinkgoHelper()
	group, sick := workers(ctx)
	n := e.NewNHC(ctx, group)
	Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
	first := e.TestCRs(ctx, sick.Name)()[0]
	Eventually(listedWith(ctx, n, sick.Name)).Should(Equal(1))
	return group, n, sick, first
}

// recordedOnce waits until the NodeHealthCheck's status records the outcome as the node's only
// one, for the remediation whose first CR is first, and the counter counts it, and nothing else.
func recordedOnce(ctx context.Context, n *remediationv1alpha1.NodeHealthCheck, node string, o remediationv1alpha1.RemediationOutcome, first unstructured.Unstructured) {
	GinkgoHelper()
	Eventually(outcomesOf(ctx, n, node)).Should(ConsistOf(ended(o, 1, n.Spec.RemediationTemplate.Name, first)))
	Eventually(outcomeCount(n, o, 1)).Should(BeNumerically("==", 1))
	Expect(outcomeTotal(n)()).To(BeNumerically("==", 1))
}

// Whole-operator specs about the remediation outcomes the nhc controller records in status (and
// counts, and explain shows): each outcome follows from what the remediation controller does (its
// CRs, their timeouts, their deletion), so both run. The nhc suite's "Remediation outcomes"
// (internal/controller/nhc/outcomes_test.go) plays the remediation controller's part instead.
var _ = Describe("Whole operator: remediation outcomes in NodeHealthCheck status", func() {
	It("records Healthy after step 1 of a single template in status, counts it once, observes the time to recovery, shows it in explain, and sets no deadline", func(ctx SpecContext) {
		_, n, sick, first := remediatedOnce(ctx)
		// The gauges are set before the status that lists the CR is written.
		Expect(deadlineOf(n, sick.Name)()).To(BeNumerically("==", -1), "a single template has no timeout: no deadline")

		e.SetReady(ctx, sick, corev1.ConditionTrue, 0)
		Eventually(outcomesOf(ctx, n, sick.Name)).Should(ConsistOf(ended(remediationv1alpha1.OutcomeHealthy, 1, n.Spec.RemediationTemplate.Name, first)))
		Expect(entryOf(ctx, n, sick.Name)()).To(BeNil(), "recorded in the write that removes the node from unhealthyNodes")
		Eventually(outcomeCount(n, remediationv1alpha1.OutcomeHealthy, 1)).Should(BeNumerically("==", 1))
		Expect(outcomeTotal(n)()).To(BeNumerically("==", 1))
		Expect(histogramCount(nhc.MetricTimeToRecovery, map[string]string{"nhc": n.Name, "remediation": "TestRemediation"})).To(BeEquivalentTo(1))
		Expect(deadlineOf(n, sick.Name)()).To(BeNumerically("==", -1))

		Expect(explainedNode(ctx, sick.Name)).To(And(ContainSubstring("NodeHealthCheck "+n.Name), ContainSubstring("last outcomes (oldest first, at most 3):"),
			ContainSubstring("Healthy after step 1 (template "+n.Spec.RemediationTemplate.Name+"): started "+first.GetCreationTimestamp().UTC().Format(time.RFC3339))))
		var out bytes.Buffer
		Expect(explain.NHC(ctx, e.K8s, n.Name, explainOptions(), &out)).To(Succeed())
		Expect(out.String()).To(ContainSubstring("recorded outcomes (the last 3 of each of 1 node(s); kubectl nhc explain node <name> shows them): Healthy 1"))

		By("a second remediation of the node is recorded after the first")
		e.SetReady(ctx, sick, corev1.ConditionFalse, time.Hour)
		Eventually(e.TestCRs(ctx, sick.Name)).Should(HaveLen(1))
		second := e.TestCRs(ctx, sick.Name)()[0]
		Eventually(listedWith(ctx, n, sick.Name)).Should(Equal(1))
		e.SetReady(ctx, sick, corev1.ConditionTrue, 0)
		Eventually(outcomesOf(ctx, n, sick.Name)).Should(HaveLen(2))
		Expect(outcomesOf(ctx, n, sick.Name)()).To(HaveExactElements(ended(remediationv1alpha1.OutcomeHealthy, 1, n.Spec.RemediationTemplate.Name, first),
			ended(remediationv1alpha1.OutcomeHealthy, 1, n.Spec.RemediationTemplate.Name, second)))
		Eventually(outcomeCount(n, remediationv1alpha1.OutcomeHealthy, 1)).Should(BeNumerically("==", 2))
	})

	It("records Healthy after step 2 of an escalation, with the deadline of its steps set while it runs and removed when it ends", func(ctx SpecContext) {
		step1, step2 := stepTemplate(ctx, kindA, 1, time.Minute, false), stepTemplate(ctx, kindB, 2, time.Hour, false)
		n, sick := escalatingNHC(ctx, step1, step2)
		Eventually(e.CRsOf(ctx, sick.Name, stepKinds...)).Should(HaveLen(1))
		first := e.CRsOf(ctx, sick.Name, stepKinds...)()[0]
		deadline := float64(first.GetCreationTimestamp().Add(time.Minute + time.Hour).Unix())
		Eventually(deadlineOf(n, sick.Name)).Should(BeNumerically("==", deadline), "the first CR's creation plus both steps' timeouts")

		// Past the first step's timeout; its CR may have been created in the second after the clock's.
		elapse(ctx, n, time.Minute+2*time.Second)
		Eventually(e.CRsOf(ctx, sick.Name, stepKinds...)).Should(HaveLen(2))
		Eventually(listedWith(ctx, n, sick.Name)).Should(Equal(2))
		Expect(deadlineOf(n, sick.Name)()).To(BeNumerically("==", deadline), "the same remediation: the same deadline")
		Expect(outcomeTotal(n)()).To(BeNumerically("==", 0), "a step that timed out ends nothing")

		e.SetReady(ctx, sick, corev1.ConditionTrue, 0)
		Eventually(outcomesOf(ctx, n, sick.Name)).Should(ConsistOf(ended(remediationv1alpha1.OutcomeHealthy, 2, step2.RemediationTemplate.Name, first)))
		Eventually(deadlineOf(n, sick.Name)).Should(BeNumerically("==", -1), "removed when the remediation ends")
		Eventually(outcomeCount(n, remediationv1alpha1.OutcomeHealthy, 2)).Should(BeNumerically("==", 1))
		Expect(outcomeTotal(n)()).To(BeNumerically("==", 1))
		Expect(explainedNode(ctx, sick.Name)).To(ContainSubstring("Healthy after step 2 (template " + step2.RemediationTemplate.Name + ")"))
	})

	It("records StepsExhausted once when the last step times out, and nothing more when the node recovers", func(ctx SpecContext) {
		step1, step2 := stepTemplate(ctx, kindA, 1, time.Minute, false), stepTemplate(ctx, kindB, 2, time.Minute, false)
		n, sick := escalatingNHC(ctx, step1, step2)
		Eventually(e.CRsOf(ctx, sick.Name, stepKinds...)).Should(HaveLen(1))
		first := e.CRsOf(ctx, sick.Name, stepKinds...)()[0]
		elapse(ctx, n, time.Minute+2*time.Second)
		Eventually(e.CRsOf(ctx, sick.Name, stepKinds...)).Should(HaveLen(2))
		elapse(ctx, n, time.Minute+2*time.Second)
		Eventually(func() bool { return timedOut(e.CRsOf(ctx, sick.Name, stepKinds...)()[1]) }).Should(BeTrue())
		last := e.CRsOf(ctx, sick.Name, stepKinds...)()[1]
		markedAt, err := time.Parse(time.RFC3339, last.GetAnnotations()[remediationv1alpha1.NHCTimedOutAnnotation])
		Expect(err).NotTo(HaveOccurred())

		Eventually(outcomesOf(ctx, n, sick.Name)).Should(ConsistOf(And(ended(remediationv1alpha1.OutcomeStepsExhausted, 2, step2.RemediationTemplate.Name, first),
			HaveField("Ended.Time", BeTemporally("==", markedAt)))), "ended when the last step timed out, as its mark says")
		Expect(listedWith(ctx, n, sick.Name)()).To(Equal(2), "the node is still listed with its CRs")
		Eventually(outcomeCount(n, remediationv1alpha1.OutcomeStepsExhausted, 2)).Should(BeNumerically("==", 1))
		Expect(deadlineOf(n, sick.Name)()).To(BeNumerically("==", first.GetCreationTimestamp().Add(2*time.Minute).Unix()),
			"still running, past the deadline of its steps")
		Expect(explainedNode(ctx, sick.Name)).To(And(ContainSubstring("StepsExhausted after step 2"),
			ContainSubstring("escalation: every step timed out or failed; no template is left")))

		By("the node recovers: its CRs go, and nothing more is recorded or counted")
		e.SetReady(ctx, sick, corev1.ConditionTrue, 0)
		// The write that removes the node from the list would record an outcome.
		Eventually(listedWith(ctx, n, sick.Name)).Should(Equal(-1))
		Expect(outcomesOf(ctx, n, sick.Name)()).To(HaveLen(1))
		Eventually(deadlineOf(n, sick.Name)).Should(BeNumerically("==", -1))
		Consistently(outcomeTotal(n)).WithTimeout(time.Second).Should(BeNumerically("==", 1))
	})

	It("records NodeDeleted when the node object is gone, and explain shows it for the node that no longer exists", func(ctx SpecContext) {
		_, n, sick, first := remediatedOnce(ctx)

		Expect(e.K8s.Delete(ctx, sick)).To(Succeed())
		recordedOnce(ctx, n, sick.Name, remediationv1alpha1.OutcomeNodeDeleted, first)
		Expect(e.TestCRs(ctx, sick.Name)()).To(BeEmpty())
		Expect(explainedNode(ctx, sick.Name)).To(And(ContainSubstring("Node "+sick.Name+" does not exist"), ContainSubstring("NodeHealthCheck "+n.Name),
			ContainSubstring("NodeDeleted after step 1")))
	})

	It("records NodeReplaced when the node object was recreated and is healthy", func(ctx SpecContext) {
		group, n, sick, first := remediatedOnce(ctx)
		// The remediator replaces the machine: its CR stays while the node is gone.
		setCondition(ctx, &first, map[string]any{"type": remediationv1alpha1.RemediationConditionPermanentNodeDeletionExpected, "status": "True",
			"reason": "Deleting", "message": "", "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)})
		Expect(e.K8s.Delete(ctx, sick)).To(Succeed())

		// The new node object is created in a later second than the CR (the API's timestamps have
		// second precision), healthy.
		Eventually(func() time.Time { return time.Now().Truncate(time.Second) }).Should(BeTemporally(">", first.GetCreationTimestamp().Time))
		replacement := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: sick.Name, Labels: map[string]string{testutil.GroupLabel: group}}}
		Eventually(func() error { return e.K8s.Create(ctx, replacement) }).Should(Succeed()) // once the old object is gone
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(e.K8s.Delete(ctx, replacement))).To(Succeed()) })
		e.SetReady(ctx, replacement, corev1.ConditionTrue, time.Hour)

		recordedOnce(ctx, n, sick.Name, remediationv1alpha1.OutcomeNodeReplaced, first)
		Expect(e.TestCRs(ctx, sick.Name)()).To(BeEmpty())
		Expect(histogramCount(nhc.MetricTimeToRecovery, map[string]string{"nhc": n.Name, "remediation": "TestRemediation"})).To(BeEquivalentTo(1))
		Expect(explainedNode(ctx, sick.Name)).To(ContainSubstring("NodeReplaced after step 1"))
	})

	It("records NodeLeftSelector when the selector no longer selects the node, and explain shows it with the NodeHealthCheck that does not select it", func(ctx SpecContext) {
		_, n, sick, first := remediatedOnce(ctx)

		label(ctx, sick, testutil.GroupLabel, "elsewhere")
		recordedOnce(ctx, n, sick.Name, remediationv1alpha1.OutcomeNodeLeftSelector, first)
		Expect(e.TestCRs(ctx, sick.Name)()).To(BeEmpty())
		Expect(explainedNode(ctx, sick.Name)).To(And(ContainSubstring("NodeHealthCheck "+n.Name+": does not select the node"),
			ContainSubstring("NodeLeftSelector after step 1")))
	})

	It("records Stopped when someone else deletes the CR of a node that is still unhealthy, and the next remediation apart", func(ctx SpecContext) {
		_, n, sick, first := remediatedOnce(ctx)

		Expect(e.K8s.Delete(ctx, &first)).To(Succeed())
		// The node is still unhealthy: a new remediation starts at once.
		Eventually(func() []unstructured.Unstructured {
			crs := e.TestCRs(ctx, sick.Name)()
			if len(crs) == 1 && crs[0].GetUID() != first.GetUID() {
				return crs
			}
			return nil
		}).Should(HaveLen(1))
		recordedOnce(ctx, n, sick.Name, remediationv1alpha1.OutcomeStopped, first)
		Eventually(listedWith(ctx, n, sick.Name)).Should(Equal(1))
		Expect(explainedNode(ctx, sick.Name)).To(And(ContainSubstring("Stopped after step 1"), ContainSubstring("decision: remediating")))
	})

	It("records nothing for a dry-run NodeHealthCheck's simulated remediations", func(ctx SpecContext) {
		group, sick := workers(ctx)
		n := e.NewNHC(ctx, group, func(n *remediationv1alpha1.NodeHealthCheck) { n.Spec.DryRun = true })
		Eventually(func() int {
			u := entryOf(ctx, n, sick.Name)()
			if u == nil {
				return 0
			}
			return len(u.DryRunRemediations)
		}).Should(Equal(1))
		e.SetReady(ctx, sick, corev1.ConditionTrue, 0)
		// The write that removes the node from the list would record an outcome.
		Eventually(listedWith(ctx, n, sick.Name)).Should(Equal(-1))
		Expect(e.Status(ctx, n)().RemediationOutcomes).To(BeEmpty())
		Consistently(outcomeTotal(n)).WithTimeout(time.Second).Should(BeNumerically("==", 0))
	})
})
