// Command cluster starts the real-node cluster (test/realnode) and keeps it running until Ctrl-C
// (`make cluster`), then removes it from the machine; with -down it only cleans up what a cluster
// before left in the folder.
//
//	go run ./test/realnode/cluster [-dir /tmp/nhc-realnode] [-down]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/medik8s/node-healthcheck/test/realnode"
)

func main() {
	dir := flag.String("dir", realnode.DefaultDir, "The cluster's folder.")
	down := flag.Bool("down", false, "Only clean up what a cluster left in -dir, and exit.")
	flag.Parse()
	logf := func(format string, args ...any) {
		fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
	}
	if *down {
		if err := realnode.Down(*dir, logf); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		logf("Nothing of a cluster is left in %s", *dir)
		return
	}
	// Signals before the cluster is up: Start's cleanup runs all the same (the watchdog).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	begin := time.Now()
	c, err := realnode.Start(realnode.Options{Dir: *dir, Logf: logf})
	if err != nil {
		fmt.Fprintln(os.Stderr, "Starting the cluster:", err)
		os.Exit(1)
	}
	logf("The cluster is up (%s). Point kubectl at it:", time.Since(begin).Round(time.Second))
	fmt.Printf(`
    export KUBECONFIG=%s
    %s get nodes -o wide

  On the node: %s --runtime-endpoint unix://%s ps
  Logs: %s
  Import an image: ctr --address %s -n k8s.io images import --base-name <repository> <archive.oci.tar>
  Ctrl-C stops the cluster and removes it from the machine.

`, c.Kubeconfig, c.KubectlPath(), c.CrictlPath(), c.ContainerdSocket, filepath.Join(c.Dir, "logs"), c.ContainerdSocket)
	<-sigs
	logf("Stopping")
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	logf("Stopped; nothing is left on the machine (logs stay in %s)", filepath.Join(c.Dir, "logs"))
}
