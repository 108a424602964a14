// Command pause is the sandbox ("pause") container of the real-node cluster (test/realnode): the process
// that holds a pod's namespaces. It waits for SIGINT or SIGTERM and exits; as PID 1 of a pod that
// shares its process namespace it also reaps orphaned children, as Kubernetes' own pause does. The
// cluster has no registry, so hack/node.sh builds it into a local OCI archive (see ./build).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
