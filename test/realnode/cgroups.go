package realnode

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The cluster's processes live in one cgroup subtree (cgroup v1, every hierarchy): the node's
// daemons in <root>/system, and the pods the kubelet creates under <root>/kubepods (the kubelet's
// cgroupRoot). Whatever runs there belongs to the cluster, so stopping it kills exactly that subtree,
// even processes that left their parent (containerd's shims, the containers).
//
// The root lies under this process's memory cgroup, so the cluster is accounted where its starter is.

// cgroupName is the last element of the cluster's cgroup root.
const cgroupName = "nhc-realnode"

// hierarchies returns the mount points of the cgroup v1 hierarchies (not the cgroup v2 one that a
// hybrid host mounts beside them: the kubelet runs on cgroup v1 here).
func hierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		// ID parent major:minor root mountpoint options [optional...] - fstype source superoptions
		fields := strings.Fields(s.Text())
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+1 >= len(fields) || fields[sep+1] != "cgroup" {
			continue
		}
		mounts = append(mounts, unescapeMount(fields[4]))
	}
	return mounts, s.Err()
}

// cgroupRoot returns the cluster's cgroup root: this process's memory cgroup plus cgroupName.
func cgroupRoot() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "memory") {
			return path.Join(parts[2], cgroupName), nil
		}
	}
	return "", errors.New("no cgroup v1 memory hierarchy: the real-node cluster needs a cgroup v1 host (the kubelet runs with failCgroupV1: false)")
}

// createCgroups creates root/system in every hierarchy and returns the folders it created, parents
// first, so that cleanup removes those and no others. A new cpuset cgroup gets its parent's CPUs and
// memory nodes (cgroup v1 leaves them empty).
func createCgroups(root string, record func(dir string) error) error {
	mounts, err := hierarchies()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		var missing []string
		for d := filepath.Join(m, root, "system"); d != m; d = filepath.Dir(d) {
			if _, err := os.Stat(d); err == nil {
				break
			}
			missing = append(missing, d)
		}
		slices.Reverse(missing)
		for _, d := range missing {
			if err := record(d); err != nil {
				return err
			}
			if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("creating cgroup %s: %w", d, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if v, err := os.ReadFile(filepath.Join(filepath.Dir(d), f)); err == nil {
					if err := os.WriteFile(filepath.Join(d, f), v, 0); err != nil {
						return fmt.Errorf("initialising cgroup %s: %w", d, err)
					}
				}
			}
		}
	}
	return nil
}

// systemProcs returns the cgroup.procs files of root/system, one per hierarchy: a process that writes
// its PID there moves there, and what it starts is born there.
func systemProcs(root string) ([]string, error) {
	mounts, err := hierarchies()
	if err != nil {
		return nil, err
	}
	procs := make([]string, 0, len(mounts))
	for _, m := range mounts {
		if strings.ContainsAny(m+root, " \t\n") {
			return nil, fmt.Errorf("cgroup %s%s: a path with spaces is not supported", m, root)
		}
		procs = append(procs, filepath.Join(m, root, "system", "cgroup.procs"))
	}
	return procs, nil
}

// cgroupPIDs returns the processes in the subtree of root, in any hierarchy.
func cgroupPIDs(root string) ([]int, error) {
	mounts, err := hierarchies()
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	for _, m := range mounts {
		err := filepath.WalkDir(filepath.Join(m, root), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return nil // removed meanwhile
			}
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	pids := make([]int, 0, len(seen))
	for pid := range seen {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids, nil
}

// killCgroup SIGKILLs every process in the subtree of root until none is left.
func killCgroup(root string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids, err := cgroupPIDs(root)
		if err != nil || len(pids) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of cgroup %s survived SIGKILL for %s", pids, root, timeout)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroups removes the subtree of root in every hierarchy, deepest first, and then the folders
// in created (the parents that createCgroups made) that are empty.
func removeCgroups(root string, created []string) error {
	mounts, err := hierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(m, root), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			if err := rmdirRetry(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := rmdirRetry(created[i]); err != nil && !errors.Is(err, syscall.EBUSY) && !errors.Is(err, syscall.ENOTEMPTY) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rmdirRetry removes a cgroup folder; a cgroup whose last process just died may be busy for a moment.
func rmdirRetry(d string) error {
	var err error
	for range 50 {
		if err = syscall.Rmdir(d); err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("removing cgroup %s: %w", d, err)
}

// unescapeMount undoes /proc/self/mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
