package localcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MountDelay is how long the mounted certificate lags behind the Secret, as a kubelet's secret
// volume does (there, up to a minute or two).
const MountDelay = 2 * time.Second

// certMount mirrors a Secret into Cluster.CertDir.
type certMount struct {
	mu      sync.Mutex
	mounted string // the Secret's resourceVersion in the folder
}

// mountSecret keeps CertDir equal to the Secret's data (only keys, when not nil, as a secret
// volume's items select them), MountDelay after each change, as the kubelet does for a pod's secret
// volume: all files change together (see writeFolder), and keys that leave the Secret leave the
// folder.
func (c *Cluster) mountSecret(name string, keys []string) {
	key := client.ObjectKey{Namespace: ChartNamespace, Name: name}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			select {
			case <-c.ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			s := &corev1.Secret{}
			if err := c.k8s.Get(c.ctx, key, s); err != nil || s.ResourceVersion == c.certs.current() {
				continue
			}
			select {
			case <-c.ctx.Done():
				return
			case <-time.After(MountDelay):
			}
			if err := c.k8s.Get(c.ctx, key, s); err != nil {
				continue
			}
			data := s.Data
			if keys != nil {
				data = map[string][]byte{}
				for _, k := range keys {
					if v, ok := s.Data[k]; ok {
						data[k] = v
					}
				}
			}
			c.certs.mu.Lock()
			if err := writeFolder(c.CertDir, data); err == nil {
				c.certs.mounted = s.ResourceVersion
			}
			c.certs.mu.Unlock()
		}
	}()
}

func (m *certMount) current() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mounted
}

// writeFolder makes dir hold data, all keys at once, as the kubelet's atomic writer updates a secret
// volume: the files are links into ..data, a link to a folder with this version's files, and one
// rename of ..data switches every file together. A reader never sees one key of the new version
// beside one of the old (a certificate with the previous private key, say). Keys that left data
// leave dir.
func writeFolder(dir string, data map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	version, err := os.MkdirTemp(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	for name, content := range data {
		if err := os.WriteFile(filepath.Join(version, name), content, 0o600); err != nil {
			return err
		}
	}
	const current, next = "..data", "..data_tmp"
	previous, _ := os.Readlink(filepath.Join(dir, current))
	_ = os.Remove(filepath.Join(dir, next))
	if err := os.Symlink(filepath.Base(version), filepath.Join(dir, next)); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(dir, next), filepath.Join(dir, current)); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, ok := data[e.Name()]; !ok && !strings.HasPrefix(e.Name(), "..") {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	for name := range data {
		link := filepath.Join(dir, name)
		if target, err := os.Readlink(link); err == nil && target == filepath.Join(current, name) {
			continue
		}
		_ = os.Remove(link) // a file from before, or a link elsewhere
		if err := os.Symlink(filepath.Join(current, name), link); err != nil {
			return err
		}
	}
	if previous != "" && previous != filepath.Base(version) {
		return os.RemoveAll(filepath.Join(dir, previous))
	}
	return nil
}

// ResetWebhookCertificate empties the webhook certificate Secret and its mount, as after a fresh
// install: the next manager makes a new CA and certificate.
func (c *Cluster) ResetWebhookCertificate(ctx context.Context) error {
	c.certs.mu.Lock()
	defer c.certs.mu.Unlock()
	s := &corev1.Secret{}
	if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: ChartNamespace, Name: WebhookSecret}, s); err != nil {
		return err
	}
	s.Data = nil
	if err := c.k8s.Update(ctx, s); err != nil {
		return err
	}
	c.certs.mounted = s.ResourceVersion
	return writeFolder(c.CertDir, nil)
}
