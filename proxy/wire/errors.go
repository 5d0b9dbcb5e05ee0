package wire

import (
	"encoding/json"
	"net/http"
)

// ErrorObject is the error body {"error":{"message","type","param","code"}}
// that OpenAI's APIs (Chat Completions, completions, embeddings, Responses)
// answer, and OpenAI-compatible servers with them.
type ErrorObject struct {
	Error ErrorObjectBody `json:"error"`
}

// ErrorObjectBody is the object under "error".
type ErrorObjectBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// ErrorType maps an HTTP status to the error type clients of that shape
// branch on.
func ErrorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "authentication_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

// ObjectError is Format.Error for the APIs answering ErrorObject: the
// status as it is, and the body.
func ObjectError(status int, code, message string) (int, []byte) {
	return status, ErrorObjectJSON(status, code, message)
}

// ErrorObjectJSON renders an ErrorObject for status, code and message.
func ErrorObjectJSON(status int, code, message string) []byte {
	body, _ := json.Marshal(ErrorObject{Error: ErrorObjectBody{Message: message, Type: ErrorType(status), Code: code}})
	return body
}
