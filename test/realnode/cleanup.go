package realnode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Everything the cluster creates outside its folder, and how it goes away:
//   - processes: in the cluster's cgroup subtree; stopped in order (the kubelet, then every pod through
//     the CRI, then the other daemons), then whatever is left is killed;
//   - mounts: all under the cluster's folder (containers' root file systems, pod volumes, the pods' and
//     the node's network namespaces); unmounted deepest first;
//   - network interfaces: all in the node's network namespace, which ends with its last process and
//     mount; the host's end of the veth pair and its routes go with it;
//   - cgroups: the subtree, and the parent folders the cluster created;
//   - the kernel settings the kubelet changes on start (vm.overcommit_memory, kernel.panic, ...): put
//     back as they were;
//   - the kubelet's links in /var/log/containers and its device-plugin socket, the CNI library's cache
//     files of the pods in /var/lib/cni/results, and those folders when the cluster created them.
//
// One routine does all of it, cleanup, in a watchdog process that the cluster starts first: it waits
// until its standard input closes, which happens when Stop closes it and also when the process that
// started the cluster dies in any way (a failed test, Ctrl-C, a test timeout, SIGKILL). The next Start
// also runs it on whatever a cluster before left (a machine that lost power, a killed watchdog), and
// so does Down (`make cluster-down`).

// watchdogEnv names the cluster folder a watchdog process cleans up.
const watchdogEnv = "NHC_REALNODE_WATCHDOG"

// A binary that links this package (the tests, `make cluster`) is also the watchdog: Start runs it
// again with watchdogEnv set.
func init() {
	if dir := os.Getenv(watchdogEnv); dir != "" {
		os.Exit(watchdog(dir))
	}
}

func watchdog(dir string) int {
	// The terminal's signals are for the process that started the cluster; the watchdog outlives it.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGQUIT)
	_, _ = io.Copy(io.Discard, os.Stdin)
	logf := func(format string, args ...any) {
		fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
	}
	logf("Cleaning up %s", dir)
	if err := cleanup(dir, logf); err != nil {
		logf("Cleanup failed: %v", err)
		return 1
	}
	logf("Clean")
	return 0
}

// state is what cleanup needs to know beyond the cluster's folder, written before each thing exists.
type state struct {
	// CgroupRoot is the cluster's cgroup (the kubelet's cgroupRoot).
	CgroupRoot string `json:"cgroupRoot"`
	// CreatedCgroups are cgroup folders created for it, parents first.
	CreatedCgroups []string `json:"createdCgroups,omitempty"`
	// Sysctls are the kernel settings the kubelet changes, as they were before.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// NodeDir holds crictl, to stop the pods through the CRI.
	NodeDir string `json:"nodeDir"`
	// ContainerdSocket is containerd's socket.
	ContainerdSocket string `json:"containerdSocket"`
	// CreatedHostDirs are the host folders the daemons write to whatever their configuration (see
	// hostDirs) that did not exist before the cluster; cleanup removes them once empty.
	CreatedHostDirs []string `json:"createdHostDirs,omitempty"`
}

// HostDirs are folders the node's daemons use whatever they are told: the kubelet links each
// container's log in /var/log/containers and serves its device-plugin registration at
// /var/lib/kubelet/device-plugins/kubelet.sock (kubeletSocket), and containerd's CNI library caches
// each pod's network in /var/lib/cni/results (files named after the network, nhc-realnode-*). Those
// the cluster creates, cleanup removes.
var HostDirs = []string{"/var/log/containers", "/var/lib/cni", "/var/lib/kubelet"}

// kubeletSocket is the kubelet's device-plugin socket, at a path no option changes: a machine that runs
// a kubelet of its own cannot run the real-node cluster beside it.
const kubeletSocket = "/var/lib/kubelet/device-plugins/kubelet.sock"

// cniCache is where the CNI library keeps the pods' results, named after the network.
const cniCache = "/var/lib/cni/results"

// lockFile in the cluster's folder is locked while a cluster runs there or is being cleaned up.
const lockFile = "lock"

func statePath(dir string) string { return filepath.Join(dir, "state.json") }

func (s *state) save(dir string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(dir) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(dir))
}

// kubeletSysctls are the kernel settings the kubelet sets when it starts (unless
// protectKernelDefaults, which makes it refuse to start on a host that differs).
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

func readSysctls() map[string]string {
	m := map[string]string{}
	for _, k := range kubeletSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			m[k] = strings.TrimSpace(string(v))
		}
	}
	return m
}

// Down removes what a cluster that is no longer running left in dir (`make cluster-down`); it refuses
// while a cluster runs there.
func Down(dir string, logf func(format string, args ...any)) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("a cluster runs in %s (or is being cleaned up): stop it with Ctrl-C where it was started: %w", dir, err)
	}
	return cleanup(dir, logf)
}

// cleanup stops and removes what the cluster in dir left: see the top of this file. It keeps
// dir/logs (the last cluster's logs, until the next starts) and dir/lock, and returns an error naming whatever
// it could not remove.
func cleanup(dir string, logf func(format string, args ...any)) error {
	var st state
	data, err := os.ReadFile(statePath(dir))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(data, &st); err != nil {
			return fmt.Errorf("reading %s: %w", statePath(dir), err)
		}
	}
	var errs []error
	if st.CgroupRoot != "" {
		stopInOrder(dir, st, logf)
		if err := killCgroup(st.CgroupRoot, 30*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if err := unmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	// The node's namespace is gone with its last process and mount, and the host's end of the link
	// with it; a namespace that something else still holds open keeps it, so remove it here.
	if linkExists(hostLink) && !waitGone(5*time.Second, func() bool { return linkExists(hostLink) }) {
		logf("The host's link %s outlived the node's namespace; deleting it", hostLink)
		if err := run("ip", "link", "del", hostLink); err != nil {
			errs = append(errs, err)
		}
	}
	if st.CgroupRoot != "" {
		if err := removeCgroups(st.CgroupRoot, st.CreatedCgroups); err != nil {
			errs = append(errs, err)
		}
	}
	for k, v := range st.Sysctls {
		if cur, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil && strings.TrimSpace(string(cur)) != v {
			logf("Restoring %s = %s (was %s)", strings.ReplaceAll(k, "/", "."), v, strings.TrimSpace(string(cur)))
			if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0); err != nil {
				errs = append(errs, fmt.Errorf("restoring %s: %w", k, err))
			}
		}
	}
	if err := removeLinksInto("/var/log/containers", dir); err != nil {
		errs = append(errs, err)
	}
	cached, _ := filepath.Glob(filepath.Join(cniCache, cniNetwork+"-*"))
	for _, f := range cached {
		errs = append(errs, os.Remove(f))
	}
	if slices.Contains(st.CreatedHostDirs, "/var/lib/kubelet") {
		if err := os.Remove(kubeletSocket); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, d := range st.CreatedHostDirs {
		if err := removeEmptyTree(d); err != nil {
			errs = append(errs, err)
		}
	}
	if left := leftovers(dir, st); len(left) > 0 {
		return errors.Join(append(errs, fmt.Errorf("left behind: %s", strings.Join(left, "; ")))...)
	}
	// Nothing is mounted under dir any more: removing it cannot reach outside.
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if e.Name() != "logs" && e.Name() != "state.json" && e.Name() != lockFile {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) == 0 {
		if err := os.Remove(statePath(dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stopInOrder stops the daemons gracefully: the kubelet first (it would restart pods), then every pod
// through the CRI (runc stops the containers, the CNI plugin releases their addresses and interfaces,
// the shims exit and remove their sockets), then the other daemons in the reverse order of their
// start, each SIGTERM with 10s to exit.
func stopInOrder(dir string, st state, logf func(string, ...any)) {
	files, _ := filepath.Glob(filepath.Join(dir, "run", "*.pid"))
	slices.Sort(files)
	slices.Reverse(files)
	pids := map[string]int{}
	var order []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || !inCgroup(pid, st.CgroupRoot) {
			continue
		}
		name := strings.TrimSuffix(strings.SplitN(filepath.Base(f), "-", 2)[1], ".pid")
		pids[name] = pid
		order = append(order, name)
	}
	stop := func(name string) {
		pid, ok := pids[name]
		if !ok {
			return
		}
		delete(pids, name)
		_ = syscall.Kill(pid, syscall.SIGTERM)
		if !waitGone(10*time.Second, func() bool { return inCgroup(pid, st.CgroupRoot) }) {
			logf("%s (PID %d) did not stop within 10s of SIGTERM", name, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	stop("kubelet")
	if _, ok := pids["containerd"]; ok && st.NodeDir != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, filepath.Join(st.NodeDir, "crictl"), //nolint:gosec // our binary
			"--runtime-endpoint=unix://"+st.ContainerdSocket, "--timeout=50s", "rmp", "--all", "--force").CombinedOutput()
		cancel()
		if err != nil {
			logf("Removing the pods through the CRI: %v: %s", err, out)
		}
	}
	for _, name := range order {
		stop(name)
	}
}

// mountsUnder returns the mount points under dir, deepest (latest) first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 {
			if mp := unescapeMount(fields[4]); strings.HasPrefix(mp, dir+"/") {
				mounts = append(mounts, mp)
			}
		}
	}
	slices.Reverse(mounts)
	return mounts, s.Err()
}

func unmountUnder(dir string) error {
	for range 10 {
		mounts, err := mountsUnder(dir)
		if err != nil || len(mounts) == 0 {
			return err
		}
		for _, m := range mounts {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	mounts, _ := mountsUnder(dir)
	return fmt.Errorf("still mounted: %v", mounts)
}

// removeEmptyTree removes the folder d if it holds nothing but empty folders.
func removeEmptyTree(d string) error {
	empty := true
	err := filepath.WalkDir(d, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() {
			empty = false
			return filepath.SkipAll
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) || !empty {
		return nil
	}
	if err != nil {
		return err
	}
	return os.RemoveAll(d)
}

// removeLinksInto removes the symbolic links in folder that point into dir.
func removeLinksInto(folder, dir string) error {
	entries, err := os.ReadDir(folder)
	if err != nil {
		return nil //nolint:nilerr // no such folder, no links
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(folder, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+"/") {
			errs = append(errs, os.Remove(p))
		}
	}
	return errors.Join(errs...)
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// waitGone polls present until it is false or the timeout passes; it reports whether it went.
func waitGone(timeout time.Duration, present func() bool) bool {
	deadline := time.Now().Add(timeout)
	for present() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// leftovers lists what of the cluster in dir is still there: processes, mounts, the host's link,
// cgroups, log links.
func leftovers(dir string, st state) []string {
	var left []string
	if st.CgroupRoot != "" {
		if pids, _ := cgroupPIDs(st.CgroupRoot); len(pids) > 0 {
			left = append(left, fmt.Sprintf("processes %v", pids))
		}
		mounts, _ := hierarchies()
		for _, m := range mounts {
			if _, err := os.Stat(filepath.Join(m, st.CgroupRoot)); err == nil {
				left = append(left, "cgroup "+filepath.Join(m, st.CgroupRoot))
			}
		}
	}
	if mounts, _ := mountsUnder(dir); len(mounts) > 0 {
		left = append(left, fmt.Sprintf("mounts %v", mounts))
	}
	if linkExists(hostLink) {
		left = append(left, "network interface "+hostLink)
	}
	if st.CgroupRoot != "" && slices.Contains(st.CreatedHostDirs, "/var/lib/kubelet") {
		if _, err := os.Stat("/var/lib/kubelet"); err == nil {
			left = append(left, "folder /var/lib/kubelet")
		}
	}
	if cached, _ := filepath.Glob(filepath.Join(cniCache, cniNetwork+"-*")); len(cached) > 0 {
		left = append(left, fmt.Sprintf("CNI cache %v", cached))
	}
	entries, _ := os.ReadDir("/var/log/containers")
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/var/log/containers", e.Name())); err == nil && strings.HasPrefix(target, dir+"/") {
			left = append(left, "link /var/log/containers/"+e.Name())
		}
	}
	return left
}

// Leftovers lists what of the cluster in dir is still on the machine (processes, mounts, network
// interfaces, cgroups): nothing after Stop.
func Leftovers(dir string) []string {
	var st state
	if data, err := os.ReadFile(statePath(dir)); err == nil {
		_ = json.Unmarshal(data, &st)
	}
	if st.CgroupRoot == "" {
		st.CgroupRoot, _ = cgroupRoot()
	}
	return leftovers(dir, st)
}
