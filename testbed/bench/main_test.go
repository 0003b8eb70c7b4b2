package bench

import (
	"os"
	"testing"

	"github.com/ztls-project/ztls/testbed/child"
)

// TestMain lets this test binary act as the testbed's helper processes
// (the link relay, the client workers), which the tests start from it.
func TestMain(m *testing.M) {
	child.Dispatch(Roles()...)
	os.Exit(m.Run())
}
