package nhc

// NodeReports is how many per-node input reports the reconciler remembers for a NodeHealthCheck.
func NodeReports(r *Reconciler, nhc string) int { return r.reports.size(nhc) }

// LastWrittenVersion is the resourceVersion of the NodeHealthCheck's last status write as the
// reconciler remembers it (holdWrite counts the batch from when it recorded the write, just after
// the API server answered it), "" when it remembers none.
func LastWrittenVersion(r *Reconciler, nhc string) string {
	r.writtenMu.Lock()
	defer r.writtenMu.Unlock()
	return r.written[nhc].resourceVersion
}
