// Package geminitest holds the Gemini API's refusal bodies that the tests of
// proxy/wire/gemini and of package proxy both answer with. Tests import it;
// nothing else does.
package geminitest

// Real refusals of the Gemini API, as documented and observed: a quota per
// minute and per day (429 RESOURCE_EXHAUSTED with a RetryInfo delay), a
// quota of zero (no retry helps) and an overloaded model (503 UNAVAILABLE).
const (
	PerMinute = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: gemini-2.5-flash","status":"RESOURCE_EXHAUSTED","details":[
	  {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"10"}]},
	  {"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},
	  {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"21.5s"}]}}`
	PerDay = `{"error":{"code":429,"message":"You exceeded your current quota.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 250, model: gemini-2.5-flash","status":"RESOURCE_EXHAUSTED","details":[
	  {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaValue":"250"}]},
	  {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"43s"}]}}`
	LimitZero  = `{"error":{"code":429,"message":"You exceeded your current quota.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_input_token_count, limit: 0, model: gemini-3-pro","status":"RESOURCE_EXHAUSTED"}}`
	Overloaded = `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`
)
