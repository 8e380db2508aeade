package config

import (
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/topology"
)

// DeployedEnv is the environment a stack with settings s gives the poller
// of the deployment named prefix, with placeholders for what is only
// known at deploy (queue URLs, secret ARNs) and for the CMS's URL, as
// infra/localeflow checks it at synth. For the tests that compare a run's
// poller configuration with Load(DeployedEnv(...)).
func DeployedEnv(prefix string, s Stack) map[string]string {
	topo := topology.New(prefix)
	queue := func(name string) string { return "https://sqs.us-east-1.amazonaws.com/000000000000/" + name }
	env := map[string]string{
		contract.EnvEventBus: topo.BusName, contract.EnvDeployment: topo.Prefix, contract.EnvMonitorTable: topo.Monitor.Name,
		contract.EnvPollQueueURL: queue(topo.PollQueue.Name), contract.EnvQuarantineQueueURL: queue(topo.Quarantine.Name),
		contract.EnvCMSBaseURL:                "https://cms.example.com",
		contract.SecretARN(contract.KeyCMS):   "arn:aws:secretsmanager:us-east-1:000000000000:secret:" + prefix + "/cms",
		contract.SecretARN(contract.KeyEvent): "arn:aws:secretsmanager:us-east-1:000000000000:secret:" + prefix + "/event",
	}
	for name, value := range s.Env() {
		env[name] = value
	}
	return env
}
