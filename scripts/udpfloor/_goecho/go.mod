module goecho

go 1.26.8

require (
	golang.org/x/net v0.60.0
	golang.org/x/sys v0.49.0
)
