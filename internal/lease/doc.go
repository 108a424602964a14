// Package lease holds the pure rules for node leases and for disrupting a node: the lease's name
// and holder identity (the public operator's, so maintenance operators and the public operator
// coordinate with this one through the same objects), how long a lease is taken for a remediation
// step, whether another party holds a lease, when and how a held lease is renewed (Renew: its
// acquisition follows the step it covers), when a remediation step is overdue, and OpenShift's
// etcd-quorum guard over the disruption budget and guard pods it reads.
//
// Everything here is a function of plain inputs and the current time: no client, no clock. The
// gatherer (internal/targets) reads leases and etcd objects from the cache or the API and asks these
// rules; the remediation controller takes, renews and releases leases with them.
package lease
