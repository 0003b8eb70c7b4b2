package hosts

import (
	"os"
	"testing"

	"github.com/ztls-project/ztls/testbed/child"
	"github.com/ztls-project/ztls/testbed/netem"
)

// TestMain lets this test binary act as the link relay, which New starts
// from it.
func TestMain(m *testing.M) {
	child.Dispatch(netem.RelayRole)
	os.Exit(m.Run())
}
