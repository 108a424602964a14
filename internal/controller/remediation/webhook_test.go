package remediation_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// newConversionWebhook returns a remediator's conversion webhook (testutil.ConversionWebhook),
// started; it is closed after the spec.
func newConversionWebhook() *testutil.ConversionWebhook {
	GinkgoHelper()
	w, err := testutil.NewConversionWebhook()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(w.Close()).To(Succeed()) })
	return w
}
