package localcluster

import (
	"context"
	"os"
	"path/filepath"
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
// volume: each file is replaced atomically, and keys that leave the Secret leave the folder.
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

func writeFolder(dir string, data map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, ok := data[e.Name()]; !ok {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	for name, content := range data {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, content, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return err
		}
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
