package realnode

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// ContainerProcess is a container's main process as the node sees it: what the runtime made of a
// pod's securityContext.
type ContainerProcess struct {
	// PID is the process's ID on the node.
	PID int
	// UIDs and GIDs are the real, effective, saved and file-system IDs (/proc/<pid>/status).
	UIDs, GIDs []int
	// CapEff and CapBnd are the effective and bounding capability sets, hexadecimal.
	CapEff, CapBnd string
	// NoNewPrivs is 1 when the process cannot gain privileges (allowPrivilegeEscalation: false).
	NoNewPrivs string
	// Seccomp is 2 when a seccomp filter confines the process.
	Seccomp string
	// Mounts are the container's mounts, in its mount namespace's order.
	Mounts []Mount
}

// Mount is one mount in a container.
type Mount struct {
	// Path is the mount point inside the container.
	Path string
	// Options are the per-mount options (ro or rw first).
	Options []string
	// FSType is the file system's type.
	FSType string
}

// ReadOnly reports whether the mount is read-only.
func (m Mount) ReadOnly() bool { return slices.Contains(m.Options, "ro") }

// ContainerProcess inspects a container of the node by its CRI ID (a pod status's containerID
// without "containerd://") and reads its main process from /proc.
func (c *Cluster) ContainerProcess(id string) (*ContainerProcess, error) {
	out, err := c.Crictl("inspect", strings.TrimPrefix(id, "containerd://"))
	if err != nil {
		return nil, err
	}
	var inspect struct {
		Info struct {
			PID int `json:"pid"`
		} `json:"info"`
	}
	if err := json.Unmarshal(out, &inspect); err != nil {
		return nil, fmt.Errorf("crictl inspect %s: %w", id, err)
	}
	p := &ContainerProcess{PID: inspect.Info.PID}
	if p.PID == 0 {
		return nil, fmt.Errorf("container %s has no process", id)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch key {
		case "Uid":
			p.UIDs = ints(value)
		case "Gid":
			p.GIDs = ints(value)
		case "CapEff":
			p.CapEff = value
		case "CapBnd":
			p.CapBnd = value
		case "NoNewPrivs":
			p.NoNewPrivs = value
		case "Seccomp":
			p.Seccomp = value
		}
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/mountinfo", p.PID))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		sep := slices.Index(fields, "-")
		if sep < 6 || sep+1 >= len(fields) {
			continue
		}
		p.Mounts = append(p.Mounts, Mount{Path: unescapeMount(fields[4]), Options: strings.Split(fields[5], ","), FSType: fields[sep+1]})
	}
	return p, s.Err()
}

// Mount returns the container's mount at path (the last one, which hides any before it).
func (p *ContainerProcess) Mount(path string) (Mount, bool) {
	for i := len(p.Mounts) - 1; i >= 0; i-- {
		if p.Mounts[i].Path == path {
			return p.Mounts[i], true
		}
	}
	return Mount{}, false
}

func ints(s string) []int {
	var r []int
	for _, f := range strings.Fields(s) {
		if v, err := strconv.Atoi(f); err == nil {
			r = append(r, v)
		}
	}
	return r
}
