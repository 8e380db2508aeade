package awsclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// TestRecordLogsWhatAuthorizesACallAndNoContent: each call through a
// recorded config is one line naming the principal, service, operation,
// table and the item's attribute names, never a value or a message body;
// without the variable the config is unchanged.
func TestRecordLogsWhatAuthorizesACallAndNoContent(t *testing.T) {
	isolate(t)
	t.Setenv(EnvCallLog, "") // make test sets it for the whole run
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL", srv.URL)
	cfg, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if got := Record(cfg, "poller"); len(got.APIOptions) != len(cfg.APIOptions) {
		t.Fatalf("without %s Record added %d options", EnvCallLog, len(got.APIOptions)-len(cfg.APIOptions))
	}
	log := filepath.Join(t.TempDir(), "calls.jsonl")
	t.Setenv(EnvCallLog, log)
	rec := Record(cfg, "poller")
	ctx := context.Background()
	if _, err := DynamoDB(rec).PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String("p-monitor"), ConditionExpression: aws.String("attribute_not_exists(#e)"),
		ExpressionAttributeNames: map[string]string{"#e": "event_id"},
		Item: map[string]types.AttributeValue{"event_id": &types.AttributeValueMemberS{Value: "evt-1"},
			"source_text": &types.AttributeValueMemberS{Value: "SECRET-TEXT"}},
	}); err != nil {
		t.Fatal(err)
	}
	_, _ = SQS(rec).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(srv.URL + "/1/p-poll"), MessageBody: aws.String("SECRET-BODY")})
	_, _ = DynamoDB(cfg).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("not-recorded")})
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "SECRET") || strings.Contains(string(b), "evt-1") || strings.Contains(string(b), "not-recorded") {
		t.Fatalf("the log holds content or an unrecorded call:\n%s", b)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), b)
	}
	var put, send Call
	if json.Unmarshal([]byte(lines[0]), &put) != nil || json.Unmarshal([]byte(lines[1]), &send) != nil {
		t.Fatalf("lines are not calls:\n%s", b)
	}
	if put.Principal != "poller" || put.Service != "DynamoDB" || put.Operation != "PutItem" || put.Params["TableName"] != "p-monitor" ||
		jsonText(put.Params["Item"]) != `["event_id","source_text"]` || put.Params["ConditionExpression"] != "attribute_not_exists(#e)" ||
		jsonText(put.Params["ExpressionAttributeNames"]) != `{"#e":"event_id"}` {
		t.Errorf("PutItem recorded as %+v", put)
	}
	if send.Service != "SQS" || send.Operation != "SendMessage" || !strings.HasSuffix(send.Params["QueueUrl"].(string), "/p-poll") {
		t.Errorf("SendMessage recorded as %+v", send)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
