package server

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/brain-tools/suite/pkg/bearer"
	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/services/brain/internal/seal"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/julienschmidt/httprouter"
)

// Tenant secrets: values a tenant stores for its custom tools to send as
// their bearer token (auth_secret_name), written through the API and never
// read back — every answer shows a secret's name and times, never its
// value. Writing a name again rotates the value; the next call uses it.
// Values are sealed (package seal) before they reach the store.

// MaxSecretBytes is the longest secret value, in bytes.
const MaxSecretBytes = 4096

// secretNameRE is a secret's name: a letter or digit, then up to 63
// letters, digits, '_', '-' or '.' (the peer's crm-webhook-secret).
var secretNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func checkSecretName(field, name string) error {
	if !secretNameRE.MatchString(name) {
		return httpapi.BadRequest("%s: %q is not a secret name: a letter or digit, then up to 63 letters, digits, '_', '-' or '.'", field, name)
	}
	return nil
}

// secretAD binds a sealed value to its tenant and name.
func secretAD(tenant, name string) []byte { return seal.AD("secret", tenant, name) }

// SecretJSON is what the API shows of a secret: never its value.
type SecretJSON struct {
	Name      string `json:"name"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

func secretJSON(s *store.Secret) SecretJSON {
	return SecretJSON{Name: s.Name, CreatedAt: timeString(s.CreatedAt), UpdatedAt: timeString(s.UpdatedAt)}
}

// putSecret answers PUT /secrets/{name} with body {"value": "..."}: 201
// when the secret is new, 200 when its value was replaced (rotated).
func (s *Server) putSecret(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, data, err := s.writeRequest(r)
	if err != nil {
		return err
	}
	name := p.ByName("name")
	if err := checkSecretName("name", name); err != nil {
		return err
	}
	var body struct {
		Value *string `json:"value"`
	}
	if err := httpapi.DecodeObject(data, &body); err != nil {
		return err
	}
	switch {
	case body.Value == nil:
		return httpapi.BadRequest("value: required: the secret itself")
	case *body.Value == "":
		return httpapi.BadRequest("value: must not be empty")
	case len(*body.Value) > MaxSecretBytes:
		return httpapi.BadRequest("value: longer than %d bytes (got %d)", MaxSecretBytes, len(*body.Value))
	}
	if err := bearer.CheckToken(*body.Value); err != nil {
		return httpapi.BadRequest("value: %v (it is sent as Authorization: Bearer)", err)
	}
	now := time.Now().UTC()
	sec := &store.Secret{TenantID: tenant, Name: name, Sealed: s.sealer.Seal(secretAD(tenant, name), []byte(*body.Value)), CreatedAt: now, UpdatedAt: now}
	created, err := s.store.PutSecret(r.Context(), sec, s.limits.Secrets)
	var le *store.LimitError
	if errors.As(err, &le) {
		return httpapi.Conflict("secrets: tenant %q has %d already, the most it keeps; delete one first", tenant, le.Limit)
	}
	if err != nil {
		return fmt.Errorf("put secret: %w", err)
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
		if sec, err = s.store.Secret(r.Context(), tenant, name); err != nil {
			return fmt.Errorf("read secret: %w", err)
		}
	}
	httpapi.WriteJSON(w, status, secretJSON(sec))
	return nil
}

func (s *Server) secret(r *http.Request, name string) (string, *store.Secret, error) {
	tenant, err := s.readRequest(r)
	if err != nil {
		return "", nil, err
	}
	sec, err := s.store.Secret(r.Context(), tenant, name)
	return tenant, sec, storeErr(err, "secret", name)
}

// getSecret answers GET /secrets/{name}: its name and times, not its value.
func (s *Server) getSecret(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	_, sec, err := s.secret(r, p.ByName("name"))
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, secretJSON(sec))
	return nil
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	tenant, err := s.readRequest(r)
	if err != nil {
		return err
	}
	list, err := s.store.Secrets(r.Context(), tenant)
	if err != nil {
		return fmt.Errorf("list secrets: %w", err)
	}
	out := make([]SecretJSON, 0, len(list))
	for _, sec := range list {
		out = append(out, secretJSON(sec))
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"secrets": out})
	return nil
}

// deleteSecret answers DELETE /secrets/{name}. A custom tool that names it
// is refused before sending from then on (missing_credential).
func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, sec, err := s.secret(r, p.ByName("name"))
	if err != nil {
		return err
	}
	if err := storeErr(s.store.DeleteSecret(r.Context(), tenant, sec.Name), "secret", sec.Name); err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, secretJSON(sec))
	return nil
}
