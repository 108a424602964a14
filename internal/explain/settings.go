package explain

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medik8s/node-healthcheck/internal/opsettings"
)

// Published are the settings an operator published, and where.
type Published struct {
	opsettings.Settings
	// ConfigMap is "<namespace>/<name>" of the ConfigMap they were read from.
	ConfigMap string
}

// FindSettings reads the settings the operator publishes (its --settings-configmap, which the chart
// sets): the one ConfigMap labelled opsettings.Label in the cluster. It fails, saying why, when the
// user may not list ConfigMaps, when none or more than one operator published, or when the
// operator has not written them yet.
func FindSettings(ctx context.Context, c client.Client) (Published, error) {
	list := &corev1.ConfigMapList{}
	if err := c.List(ctx, list, client.MatchingLabels{opsettings.Label: "true"}); err != nil {
		return Published{}, fmt.Errorf("listing the ConfigMaps labelled %s=true: %w", opsettings.Label, err)
	}
	switch len(list.Items) {
	case 0:
		return Published{}, fmt.Errorf("no ConfigMap labelled %s=true: no operator publishes its settings (install with the chart, or run the manager with --settings-configmap)", opsettings.Label)
	case 1:
	default:
		var names []string
		for _, cm := range list.Items {
			names = append(names, cm.Namespace+"/"+cm.Name)
		}
		return Published{}, fmt.Errorf("more than one operator publishes its settings (%s): name the operator's with the flags", strings.Join(names, ", "))
	}
	cm := list.Items[0]
	s, err := opsettings.Parse(cm.Data)
	if err != nil {
		return Published{}, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return Published{Settings: s, ConfigMap: cm.Namespace + "/" + cm.Name}, nil
}
