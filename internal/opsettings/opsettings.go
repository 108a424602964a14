// Package opsettings is how the operator publishes the settings that decide its answers and that
// tools outside it need to give the same answers (kubectl nhc explain): the node-lease namespace,
// the returning-node grace, the clock-skew bound and the removal hold, and its version. The manager writes them into
// a ConfigMap the chart creates empty (--settings-configmap); readers find it by its label.
package opsettings

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/health"
)

// Label marks the ConfigMap that holds an operator's published settings ("true").
const Label = "remediation.medik8s.io/operator-settings"

// The ConfigMap's keys.
const (
	KeyLeaseNamespace     = "leaseNamespace"
	KeyReturningNodeGrace = "returningNodeGrace"
	KeyMaxClockSkew       = "maxClockSkew"
	KeyRemovalHold        = "removalHold"
	KeyVersion            = "version"
)

// Settings are what the operator publishes.
type Settings struct {
	LeaseNamespace     string
	ReturningNodeGrace time.Duration
	MaxClockSkew       time.Duration
	// RemovalHold is --removal-hold; operators before it published none (read as the default).
	RemovalHold time.Duration
	Version     string
}

// Data is the ConfigMap data of s.
func (s Settings) Data() map[string]string {
	return map[string]string{
		KeyLeaseNamespace:     s.LeaseNamespace,
		KeyReturningNodeGrace: s.ReturningNodeGrace.String(),
		KeyMaxClockSkew:       s.MaxClockSkew.String(),
		KeyRemovalHold:        s.RemovalHold.String(),
		KeyVersion:            s.Version,
	}
}

// Parse reads settings from ConfigMap data; it fails when the operator has not published them
// (no lease namespace) or a duration does not parse.
func Parse(data map[string]string) (Settings, error) {
	s := Settings{LeaseNamespace: data[KeyLeaseNamespace], Version: data[KeyVersion]}
	if s.LeaseNamespace == "" {
		return Settings{}, fmt.Errorf("no %s: the operator has not published its settings (yet)", KeyLeaseNamespace)
	}
	var err error
	if s.ReturningNodeGrace, err = time.ParseDuration(data[KeyReturningNodeGrace]); err != nil {
		return Settings{}, fmt.Errorf("%s: %w", KeyReturningNodeGrace, err)
	}
	if s.MaxClockSkew, err = time.ParseDuration(data[KeyMaxClockSkew]); err != nil {
		return Settings{}, fmt.Errorf("%s: %w", KeyMaxClockSkew, err)
	}
	s.RemovalHold = health.DefaultRemovalHold
	if v, ok := data[KeyRemovalHold]; ok {
		if s.RemovalHold, err = time.ParseDuration(v); err != nil {
			return Settings{}, fmt.Errorf("%s: %w", KeyRemovalHold, err)
		}
	}
	return s, nil
}

// Publish writes s into the ConfigMap, which must exist (the chart creates it, and grants the
// operator get and update on it alone); it writes nothing when the ConfigMap holds s already. r
// reads around any cache: a cached read would start an informer of every ConfigMap, which the
// operator may not list.
func Publish(ctx context.Context, r client.Reader, w client.Writer, key types.NamespacedName, s Settings) error {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, key, cm); err != nil {
		return fmt.Errorf("reading the settings ConfigMap %s: %w", key, err)
	}
	data := s.Data()
	same := cm.Labels[Label] == "true" && len(cm.Data) == len(data)
	for k, v := range data {
		same = same && cm.Data[k] == v
	}
	if same {
		return nil
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[Label] = "true"
	cm.Data = data
	if err := w.Update(ctx, cm); err != nil {
		return fmt.Errorf("publishing the settings in ConfigMap %s: %w", key, err)
	}
	return nil
}
