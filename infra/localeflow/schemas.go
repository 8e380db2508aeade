package localeflow

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awseventschemas"
	"github.com/aws/jsii-runtime-go"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/contract/schema"
)

// EventSchemaRegistryName is the name of the deployment's EventBridge
// schema registry: <prefix>-events.
func EventSchemaRegistryName(prefix string) string { return prefix + "-events" }

// EventSchemaLogicalID is the logical ID of a detail-type's registry
// schema: "localeflow.change.terminal" → "EventSchemaChangeTerminal".
func EventSchemaLogicalID(detailType string) string {
	var b strings.Builder
	b.WriteString("EventSchema")
	for _, part := range strings.Split(strings.TrimPrefix(detailType, contract.EventSource+"."), ".") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

// registryDetailTypes are the detail-types the registry holds a schema
// for: every input and output.
func registryDetailTypes() []string {
	return append(append([]string{}, contract.InputDetailTypes...), contract.OutputDetailTypes...)
}

// eventSchemas converts every registry detail-type's schema.
func eventSchemas() (map[string]string, error) {
	out := map[string]string{}
	for _, dt := range registryDetailTypes() {
		content, err := schema.RegistrySchema(contract.EventSource, dt)
		if err != nil {
			return nil, fmt.Errorf("infra: event schema registry: %w", err)
		}
		out[dt] = string(content)
	}
	return out, nil
}

// addSchemaRegistry registers every input and output detail-type's schema
// in an EventBridge schema registry, so consumers can browse them and
// download code bindings. The content is generated at synth time from the
// schema files in contract/schema (schema.RegistrySchema converts each
// to the registry's JSONSchemaDraft4 form): it cannot drift from them.
func (b *builder) addSchemaRegistry() {
	// resolve converted every schema (eventSchemas).
	name := EventSchemaRegistryName(b.cfg.topo.Prefix)
	registry := awseventschemas.NewCfnRegistry(b.scope, jsii.String("EventSchemaRegistry"), &awseventschemas.CfnRegistryProps{
		RegistryName: jsii.String(name),
		Description:  jsii.String("localeflow event details (contract/schema), one schema per detail-type"),
	})
	for _, dt := range registryDetailTypes() {
		content := b.cfg.eventSchemas[dt]
		// RegistryName's GetAtt orders each schema after the registry (an
		// explicit DependsOn on top is cfn-lint W3005).
		awseventschemas.NewCfnSchema(b.scope, jsii.String(EventSchemaLogicalID(dt)), &awseventschemas.CfnSchemaProps{
			RegistryName: registry.AttrRegistryName(),
			SchemaName:   jsii.String(schema.RegistrySchemaName(contract.EventSource, dt)),
			Type:         jsii.String(schema.RegistrySchemaType),
			Content:      jsii.String(content),
			Description:  jsii.String("The " + dt + " event (detail: contract/schema/" + schema.ForDetailType[dt] + ")"),
		})
	}
}
