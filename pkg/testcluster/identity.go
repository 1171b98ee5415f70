package testcluster

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ServiceAccountUser is the user name a ServiceAccount's token authenticates
// as, e.g. in audit logs and RBAC denials.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// ServiceAccountKubeconfig asks the TokenRequest API for a token of the
// ServiceAccount namespace/name, valid for ttl, and writes a kubeconfig that
// authenticates with it (and nothing else) to path. It returns the client
// configuration of the same credential. The ServiceAccount must exist; what
// the credential may do is whatever RBAC grants the ServiceAccount.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, namespace, name, path string, ttl time.Duration) (*rest.Config, error) {
	seconds := int64(ttl / time.Second)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	tr, err := c.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("request token for serviceaccount %s/%s: %w", namespace, name, err)
	}
	user := ServiceAccountUser(namespace, name)
	const clusterName = "testcluster"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{Server: c.RESTConfig.Host, CertificateAuthorityData: c.RESTConfig.CAData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[clusterName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: user}
	cfg.CurrentContext = clusterName
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return nil, fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return &rest.Config{
		Host:            c.RESTConfig.Host,
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.RESTConfig.CAData},
		QPS:             c.RESTConfig.QPS,
		Burst:           c.RESTConfig.Burst,
	}, nil
}
