package realnode

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one of the node's daemons.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string
}

// exited reports whether the process has ended, with its error and the end of its log.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); the end of %s:\n%s", p.name, p.err, p.log, tail(p.log, 20))
	default:
		return nil
	}
}

// run starts a daemon of the node: in the node's network namespace and the cluster's cgroup, in a
// process group of its own (a Ctrl-C in the terminal reaches the test, whose cleanup stops the daemons
// in order, not the daemons themselves), with its output in logs/<name>.log and its PID in
// run/<n>-<name>.pid, which cleanup reads to stop the daemons in the reverse order.
func (c *Cluster) run(name, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(c.Dir, "logs", name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := inNode(c.netnsPath(), c.cgroupProcs, bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// containerd finds its shim on PATH; kube-proxy needs nft, the kubelet mount.
	cmd.Env = append(cmd.Env, "PATH="+c.nodeDir+":"+hostPath())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	pidFile := filepath.Join(c.Dir, "run", fmt.Sprintf("%02d-%s.pid", len(c.procs), name))
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

// waitFor polls ready every 100ms until it returns true, an error, any daemon exits or the timeout
// passes.
func (c *Cluster) waitFor(what string, timeout time.Duration, ready func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		for _, p := range c.procs {
			if err := p.exited(); err != nil {
				return fmt.Errorf("waiting for %s: %w", what, err)
			}
		}
		ok, err := ready()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (last error: %v)", what, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// inCgroup reports whether the process is in the cgroup subtree root (a PID of the cluster that was
// not reused since).
func inCgroup(pid int, root string) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	return err == nil && strings.Contains(string(data), root+"/")
}
