package clockskew_test

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// A real kube-apiserver whose clock is this process's: a manager clock shifted by d is d off the
// API server's, exactly.
var (
	env *envtest.Environment
	cfg *rest.Config
)

func TestClockSkew(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "clockskew suite")
}

var _ = BeforeSuite(func() {
	testutil.LogToGinkgo()
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(20 * time.Millisecond)
	Expect(testutil.CheckAssets()).To(Succeed())
	env = testutil.NewEnvironment(nil, false)
	var err error
	cfg, err = env.Start()
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
