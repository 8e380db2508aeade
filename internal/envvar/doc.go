// Package envvar reads a function's settings from environment variables at
// cold start. A Reader trims every value, leaves a setting at its default
// when its variable is unset or blank, and collects one error per bad value
// (naming the variable, never echoing the value) so a misconfigured
// function reports everything wrong at once.
package envvar
