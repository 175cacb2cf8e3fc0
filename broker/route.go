package broker

import (
	"net/http"
	"net/url"
	"strings"
)

// Route is the REST request that a command's subject names, after the entry's prefix:
//
//	create                               POST   /v1/orders
//	payments.<paymentId>.confirm         POST   /v1/payments/<paymentId>/confirm
//	<orderId>.<a>.<b>…                   POST   /v1/orders/<orderId>/<a>/<b>…
//	<orderId>.lines.<sku>.put            PUT    /v1/orders/<orderId>/lines/<sku>
//	<orderId>.lines.<sku>.delete         DELETE /v1/orders/<orderId>/lines/<sku>
//
// Each token is one path segment, escaped. A subject that names no route is mapped all the same
// and answered by the API, as the request would be (404, 405).
func Route(prefix, subject string) (method, path string) {
	tokens := strings.Split(strings.TrimPrefix(subject, prefix+"."), ".")
	for i, t := range tokens {
		tokens[i] = url.PathEscape(t)
	}
	method = http.MethodPost
	switch n := len(tokens); {
	case n == 1 && tokens[0] == "create":
		return method, "/v1/orders"
	case n == 3 && tokens[0] == "payments":
		return method, "/v1/payments/" + tokens[1] + "/" + tokens[2]
	case n > 2 && tokens[n-1] == "put":
		method, tokens = http.MethodPut, tokens[:n-1]
	case n > 2 && tokens[n-1] == "delete":
		method, tokens = http.MethodDelete, tokens[:n-1]
	}
	return method, "/v1/orders/" + strings.Join(tokens, "/")
}
