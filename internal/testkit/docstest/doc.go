// Package docstest holds the tests that keep the documentation true: the
// README's walkthrough runs as written and prints what it shows, every
// relative link and anchor resolves, the package map lists every package
// and the configuration table lists every variable. It has no code of its
// own; import nothing from it.
package docstest
