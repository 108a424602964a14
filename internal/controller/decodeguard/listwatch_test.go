package decodeguard_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/decodeguard"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// entry returns the registry's entry of the named NodeHealthCheck, which must be there.
func entry(reg *decodeguard.Registry, name string) decodeguard.Entry {
	GinkgoHelper()
	en, ok := reg.Get(name)
	Expect(ok).To(BeTrue(), "%s is not recorded as undecodable", name)
	return en
}

// The list-watch on its own, against the API server: both ways a reflector lists (pages of a List,
// and a watch-list's initial events), then watch events that break, fix and delete an object.
var _ = Describe("The NodeHealthCheck list-watch", func() {
	var (
		lw         toolscache.ListerWatcherWithContext
		reg        *decodeguard.Registry
		good, bad  string
		goodObject *remediationv1alpha1.NodeHealthCheck
	)
	BeforeEach(func(ctx SpecContext) {
		client, err := dynamic.NewForConfig(e.Env.Config)
		Expect(err).NotTo(HaveOccurred())
		reg = decodeguard.NewRegistry()
		lw = toolscache.ToListerWatcherWithContext(decodeguard.NewListerWatcher(client.Resource(decodeguard.Resource), reg))
		good, bad = e.Unique("lw-good"), e.Unique("lw-bad")
		goodObject = testutil.NewNHC(good)
		e.Create(ctx, goodObject)
		e.Create(ctx, undecodable(testutil.NewNHC(bad), "99999999999h", "spec", "healthyDelay"))
	})

	names := func(items []remediationv1alpha1.NodeHealthCheck) []string {
		var out []string
		for _, i := range items {
			out = append(out, i.Name)
		}
		return out
	}

	It("lists page by page, leaving out what does not decode, and records it once the last page is read", func(ctx SpecContext) {
		var listed []string
		opts := metav1.ListOptions{Limit: 1}
		for {
			obj, err := lw.ListWithContext(ctx, opts)
			Expect(err).NotTo(HaveOccurred())
			list := obj.(*remediationv1alpha1.NodeHealthCheckList)
			Expect(len(list.Items)).To(BeNumerically("<=", 1))
			listed = append(listed, names(list.Items)...)
			if list.Continue == "" {
				break
			}
			Expect(reg.List()).To(BeEmpty(), "nothing is recorded before the list is complete")
			opts.Continue = list.Continue
		}
		Expect(listed).To(ContainElement(good))
		Expect(listed).NotTo(ContainElements(bad, brokenAtStart))
		Expect(entry(reg, bad)).To(HaveField("Error", HavePrefix("spec.healthyDelay: ")))
		Expect(entry(reg, brokenAtStart)).To(HaveField("Name", brokenAtStart))
	})

	It("streams a watch-list without the undecodable objects, then turns breaking updates into deletions", func(ctx SpecContext) {
		w, err := lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true),
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		next := func() watch.Event {
			var ev watch.Event
			Eventually(w.ResultChan()).WithTimeout(10 * time.Second).Should(Receive(&ev))
			Expect(ev.Object).To(BeAssignableToTypeOf(&remediationv1alpha1.NodeHealthCheck{}))
			return ev
		}

		By("the initial events hold the good objects only, and end with the bookmark")
		var initial []string
		for {
			ev := next()
			if ev.Type == watch.Bookmark {
				meta := ev.Object.(*remediationv1alpha1.NodeHealthCheck).ObjectMeta
				if meta.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
					Expect(meta.ResourceVersion).NotTo(BeEmpty())
					break
				}
				continue
			}
			Expect(ev.Type).To(Equal(watch.Added))
			initial = append(initial, ev.Object.(*remediationv1alpha1.NodeHealthCheck).Name)
		}
		Expect(initial).To(ContainElement(good))
		Expect(initial).NotTo(ContainElements(bad, brokenAtStart))
		Expect(entry(reg, bad)).To(HaveField("Name", bad))

		// untilEventFor returns the next event for the named object, or with a resourceVersion the
		// event for that version of it: the nhc controller of this suite writes the status of the
		// good object too, whose events may come first.
		untilEventFor := func(name, resourceVersion string) watch.Event {
			for {
				ev := next()
				if ev.Type == watch.Bookmark {
					continue
				}
				o := ev.Object.(*remediationv1alpha1.NodeHealthCheck)
				if o.Name == name && (resourceVersion == "" || o.ResourceVersion == resourceVersion) {
					return ev
				}
			}
		}
		By("an update that breaks the good object becomes its deletion")
		ev := untilEventFor(good, patch(ctx, good, `{"spec":{"minHealthy":99999999999}}`))
		Expect(ev.Type).To(Equal(watch.Deleted))
		Expect(ev.Object.(*remediationv1alpha1.NodeHealthCheck).UID).To(Equal(goodObject.UID))
		Expect(entry(reg, good)).To(HaveField("Error", HavePrefix("spec.minHealthy: ")))

		By("fixing it passes the update, and it leaves the registry")
		ev = untilEventFor(good, patch(ctx, good, `{"spec":{"minHealthy":"51%"}}`))
		Expect(ev.Type).To(Equal(watch.Modified))
		Expect(ev.Object.(*remediationv1alpha1.NodeHealthCheck).Spec.MinHealthy.String()).To(Equal("51%"))
		_, ok := reg.Get(good)
		Expect(ok).To(BeFalse())

		By("deleting the undecodable object passes its deletion, and it leaves the registry")
		Expect(e.K8s.Delete(ctx, &remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: bad}})).To(Succeed())
		Expect(untilEventFor(bad, "").Type).To(Equal(watch.Deleted))
		_, ok = reg.Get(bad)
		Expect(ok).To(BeFalse())
	})
})
