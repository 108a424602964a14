// Package uninstall owns what the chart's post-delete hook does at `helm uninstall` (`manager
// cleanup`): it deletes the Leases the operator leaves behind, which nothing else would. The leader
// election Lease stays when the uninstall removed the leader's rights before it could release it (it
// serves on for --shutdown-delay after SIGTERM), and a running remediation's node Lease in the shared
// lease namespace stays held by its NodeHealthCheck, renewed by no one, and keeps other medik8s
// operators (node maintenance) away from the node until it expires. Only the node Leases labelled
// with the release's identity are its own: other releases and the public operator share the lease
// namespace and the holder identities. Decide is pure; Run gathers, decides and deletes.
package uninstall
