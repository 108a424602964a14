package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// DefaultShutdownDelay is how long the manager keeps serving after SIGTERM before it stops. When a
// pod is deleted (a rolling update, a drain) the kubelet sends SIGTERM while the endpoint controller
// takes the pod out of its Services' endpoints and every kube-proxy rewrites its rules: until then
// the API server's new connections to the webhook Service may still reach this pod, and a webhook
// server that already closed its port fails them ("connect: connection refused"; the webhooks fail
// closed, so the client's create or update fails). Seen on the real node (test/realnode) within a
// second of the SIGTERM; 5s covers the propagation of a busy cluster as a preStop sleep of 5s would,
// which the image (no shell) cannot run. It delays the release of the leader Lease by as much; the
// pod's 30s grace period holds it and the manager's 20s graceful shutdown.
const DefaultShutdownDelay = 5 * time.Second

// shutdownContext returns a context cancelled delay after the first of signals (SIGTERM, SIGINT) is
// received. A second signal calls exit(1) at once, as controller-runtime's signal handler does.
func shutdownContext(signals <-chan os.Signal, delay time.Duration, clk clock.Clock, exit func(int), log logr.Logger) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		sig := <-signals
		if delay > 0 {
			log.Info("Serving on before stopping, until the endpoints no longer route to this pod", "signal", sig.String(), "delay", delay)
			select {
			case <-clk.After(delay):
			case <-signals:
				exit(1)
				return
			}
		}
		cancel()
		<-signals
		exit(1)
	}()
	return ctx
}

// signalShutdownContext is shutdownContext on this process's SIGTERM and SIGINT.
func signalShutdownContext(delay time.Duration, log logr.Logger) context.Context {
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	return shutdownContext(signals, delay, clock.RealClock{}, os.Exit, log)
}
