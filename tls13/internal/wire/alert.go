package wire

import "github.com/ztls-project/ztls/tls13/internal/alert"

// decodeErr, illegalErr and internalErr keep the common cases of this
// package's *alert.Error short; all its messages start with "wire: ".
func decodeErr(format string, args ...any) *alert.Error {
	return alert.Errorf(alert.DecodeError, "wire: "+format, args...)
}

func illegalErr(format string, args ...any) *alert.Error {
	return alert.Errorf(alert.IllegalParameter, "wire: "+format, args...)
}

func internalErr(format string, args ...any) *alert.Error {
	return alert.Errorf(alert.InternalError, "wire: "+format, args...)
}
