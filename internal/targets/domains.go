package targets

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/health"
	"github.com/medik8s/node-healthcheck/internal/remediationcr"
)

// A node's failure domain is a label (spec.failureDomain.topologyKey), and a kubelet may set
// topology.kubernetes.io/zone and /region on its own Node (NodeRestriction allows them): a node could
// leave a held domain to be remediated, or join another to hold it or to lift its percentage bound.
// So the domains a node was in lately count too (health.Node.OtherDomains): those a gatherer saw it
// in within DomainMemory, kept for as long as the node is unhealthy, about to be or under
// remediation, and the one its remediation's CRs recorded when they were created
// (remediation.medik8s.io/failure-domain, written by the operator).

// DomainMemory is how long a domain a node left still counts, once the node is healthy and not
// under remediation: longer than a condition's duration and a first step, so that a node cannot
// hop out of a domain between failing and being remediated.
const DomainMemory = time.Hour

// maxDomainsPerNode bounds what is remembered of one node: a node that hops through more domains
// counts in the most recent ones.
const maxDomainsPerNode = 16

// domainsSeen remembers, per topology key and node, the domains a gatherer saw the node in, and
// when last.
type domainsSeen struct {
	mu   sync.Mutex
	seen map[string]map[string][]domainSeen
	// pruned is when stale nodes were last dropped.
	pruned time.Time
}

type domainSeen struct {
	domain string
	last   time.Time
}

// otherDomains gives each node of the input the domains, besides its current one, that it was seen
// in within DomainMemory (or while it has been in trouble since) or that its CRs recorded.
func (g *Gatherer) otherDomains(in *health.Input, key string, crs map[string][]unstructured.Unstructured, now time.Time) {
	r := &g.domains
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]map[string][]domainSeen{}
	}
	byNode := r.seen[key]
	if byNode == nil {
		byNode = map[string][]domainSeen{}
		r.seen[key] = byNode
	}
	for i := range in.Nodes {
		n := &in.Nodes[i]
		// In trouble, every domain it was seen in stays fresh.
		trouble := n.Remediating || health.EvaluateNode(in.UnhealthyConditions, n.Conditions, now).State != health.Healthy
		var kept []domainSeen
		for _, d := range byNode[n.Name] {
			if trouble {
				d.last = now
			}
			if d.domain != n.Domain && now.Sub(d.last) <= DomainMemory {
				kept = append(kept, d)
			}
		}
		kept = append(kept, domainSeen{domain: n.Domain, last: now})
		if len(kept) > maxDomainsPerNode {
			kept = kept[len(kept)-maxDomainsPerNode:]
		}
		byNode[n.Name] = kept
		n.OtherDomains = nil
		for _, d := range kept[:len(kept)-1] {
			n.OtherDomains = append(n.OtherDomains, d.domain)
		}
		for _, cr := range crs[n.Name] {
			if v, ok := remediationcr.Annotation(&cr, remediationv1alpha1.FailureDomainAnnotation); ok {
				if recorded, found := remediationcr.CutDomain(v, key); found && recorded != n.Domain && !slices.Contains(n.OtherDomains, recorded) {
					n.OtherDomains = append(n.OtherDomains, recorded)
				}
			}
		}
	}
	if now.Sub(r.pruned) > DomainMemory || now.Before(r.pruned) {
		r.pruned = now
		for k, nodes := range r.seen {
			for node, ds := range nodes {
				if now.Sub(ds[len(ds)-1].last) > DomainMemory {
					delete(nodes, node)
				}
			}
			if len(nodes) == 0 {
				delete(r.seen, k)
			}
		}
	}
}
