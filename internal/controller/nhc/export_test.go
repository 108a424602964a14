package nhc

// NodeReports is how many per-node input reports the reconciler remembers for a NodeHealthCheck.
func NodeReports(r *Reconciler, nhc string) int { return r.reports.size(nhc) }
