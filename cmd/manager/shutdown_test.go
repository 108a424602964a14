package main

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestShutdownContext: after SIGTERM the manager keeps running (and serving its webhooks) for the
// delay, then stops; a second signal exits at once.
func TestShutdownContext(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	signals := make(chan os.Signal, 2)
	exited := make(chan int, 1)
	ctx := shutdownContext(signals, 5*time.Second, clk, func(code int) { exited <- code }, logr.Discard())

	signals <- syscall.SIGTERM
	waitWaiters(t, clk)
	clk.Step(5*time.Second - time.Millisecond)
	select {
	case <-ctx.Done():
		t.Fatal("stopped before the delay passed")
	default:
	}
	clk.Step(time.Millisecond)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not stopped after the delay")
	}
	signals <- syscall.SIGTERM
	select {
	case code := <-exited:
		if code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second signal did not exit")
	}
}

// TestShutdownContextSecondSignalDuringDelay: a second signal during the delay exits at once.
func TestShutdownContextSecondSignalDuringDelay(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	signals := make(chan os.Signal, 2)
	exited := make(chan int, 1)
	ctx := shutdownContext(signals, 5*time.Second, clk, func(code int) { exited <- code }, logr.Discard())
	signals <- syscall.SIGTERM
	waitWaiters(t, clk)
	signals <- os.Interrupt
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("a second signal during the delay did not exit")
	}
	if ctx.Err() != nil {
		t.Error("the context was cancelled instead of exiting")
	}
}

// TestShutdownContextNoDelay: with delay 0 the first signal stops the manager at once.
func TestShutdownContextNoDelay(t *testing.T) {
	signals := make(chan os.Signal, 2)
	ctx := shutdownContext(signals, 0, clocktesting.NewFakeClock(time.Now()), func(int) {}, logr.Discard())
	signals <- syscall.SIGTERM
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not stopped")
	}
}

// waitWaiters waits until the shutdown goroutine waits on the fake clock.
func waitWaiters(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the signal was not received")
		}
		time.Sleep(time.Millisecond)
	}
}
