// Package e2e holds the local service's end-to-end tests and its
// benchmark: the real local binary and the real brain binary, built from
// this repository by the tests, talking over loopback, with the operator
// page driven in Debian's chromium. It has no code outside its tests.
package e2e
