package main

import (
	"fmt"
	"net/url"
	"path"
	"sort"
	"strings"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/topology"
)

// codeDeploymentAmbiguous: without --prefix, the variables (and table
// flags) that name a deployment name two, or one of them is not a name
// of any deployment; nothing was called.
const codeDeploymentAmbiguous = "cli.deployment_ambiguous"

// deploymentHint is how a command is told its deployment.
const deploymentHint = "--prefix P, or the variables of one deployment (" + contract.EnvDeployment + ", " +
	contract.EnvMonitorTable + ", " + contract.EnvReleaseTable + ", " + contract.EnvPollQueueURL + ", " +
	contract.EnvReleaseQueueURL + ", " + contract.EnvQuarantineQueueURL + ")"

// deploymentSource is one place that names a deployment: a variable or a
// flag and the prefix its value implies.
type deploymentSource struct {
	name, value, prefix string
	// derivable is false for a table name that follows no deployment's
	// naming (a table given by hand): it names its table, not a prefix.
	derivable bool
}

// suffixOf is the part of a topology name after the prefix ("-monitor").
func suffixOf(name func(topology.Topology) string) string {
	const p = "p"
	return strings.TrimPrefix(name(topology.New(p)), p)
}

// prefixOf is the prefix whose topology names a resource name with suffix,
// or "" when name is not such a name.
func prefixOf(name, suffix string) string {
	p, ok := strings.CutSuffix(name, suffix)
	if !ok || topology.ValidatePrefix(p) != nil {
		return ""
	}
	return p
}

// queueName is the queue name at the end of a queue URL.
func queueName(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Path == "" {
		return ""
	}
	return path.Base(u.Path)
}

// deploymentSources are the variables and table flags that name a
// deployment, with the prefix each implies.
func (c *cli) deploymentSources() []deploymentSource {
	var out []deploymentSource
	add := func(name, value, prefix string, derivable bool) {
		if value != "" {
			out = append(out, deploymentSource{name: name, value: value, prefix: prefix, derivable: derivable})
		}
	}
	env := func(name string) string { return strings.TrimSpace(c.getenv(name)) }
	if v := env(contract.EnvDeployment); v != "" {
		p := v
		if topology.ValidatePrefix(v) != nil {
			p = ""
		}
		add(contract.EnvDeployment, v, p, true)
	}
	tables := []struct {
		flag, envName, flagValue string
		suffix                   string
	}{
		{"--monitor-table", contract.EnvMonitorTable, c.monitorTableFlag, suffixOf(func(t topology.Topology) string { return t.Monitor.Name })},
		{"--release-table", contract.EnvReleaseTable, c.releaseTableFlag, suffixOf(func(t topology.Topology) string { return t.Release.Name })},
	}
	for _, t := range tables {
		name, v := t.flag, t.flagValue
		if v == "" {
			name, v = t.envName, env(t.envName)
		}
		p := prefixOf(v, t.suffix)
		add(name, v, p, p != "")
	}
	for _, q := range []struct {
		envName string
		suffix  string
	}{
		{contract.EnvPollQueueURL, suffixOf(func(t topology.Topology) string { return t.PollQueue.Name })},
		{contract.EnvReleaseQueueURL, suffixOf(func(t topology.Topology) string { return t.RelQueue.Name })},
		{contract.EnvQuarantineQueueURL, suffixOf(func(t topology.Topology) string { return t.Quarantine.Name })},
	} {
		v := env(q.envName)
		add(q.envName, v, prefixOf(queueName(v), q.suffix), true)
	}
	return out
}

// deploymentPrefix is the deployment a command works on: --prefix, else
// the one prefix its variables (and table flags) agree on. It refuses when
// they name two deployments or a queue variable or LOCALEFLOW_DEPLOYMENT
// names none (cli.deployment_ambiguous), and, when required, when nothing
// names one (a usage error): no command falls back to a default
// deployment.
func (c *cli) deploymentPrefix(required bool) (string, error) {
	if c.prefix != "" {
		return c.prefix, nil
	}
	prefixes := map[string][]string{}
	for _, s := range c.deploymentSources() {
		if !s.derivable {
			continue
		}
		if s.prefix == "" {
			return "", core.Wrap(codeDeploymentAmbiguous, false, fmt.Errorf("%s=%q names no localeflow deployment: give --prefix", s.name, s.value))
		}
		prefixes[s.prefix] = append(prefixes[s.prefix], s.name)
	}
	switch len(prefixes) {
	case 0:
		if required {
			return "", usagef("%s: name the deployment: %s", c.command(), deploymentHint)
		}
		return "", nil
	case 1:
		for p := range prefixes {
			return p, nil
		}
	}
	var parts []string
	for p, names := range prefixes {
		parts = append(parts, fmt.Sprintf("%s (%s)", p, strings.Join(names, ", ")))
	}
	sort.Strings(parts)
	return "", core.Wrap(codeDeploymentAmbiguous, false, fmt.Errorf("the variables name %d deployments: %s; give --prefix", len(parts), strings.Join(parts, " and ")))
}
