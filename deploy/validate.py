"""Offline validation of toolgate's deployment files (no container engine, no cluster).

  python deploy/validate.py --toolgate target/debug/toolgate

- Kubernetes: renders deploy/kubernetes/kustomization.yaml with `kubectl
  kustomize` when kubectl is installed, and the way kustomize would for what it
  uses (resources, configMapGenerator, labels) in any case; validates every
  object against the Kubernetes OpenAPI schemas bundled in `kubernetes-validate`
  (strict: unknown fields are errors), and checks what the sidecar must have
  and the Prometheus scrape annotations.
- Grafana: deploy/grafana/toolgate.json is a dashboard on toolgate's metrics
  (the integration tests check every metric it names is exported).
- Compose: `docker-compose config -q` (Debian's docker-compose, which needs no
  engine for `config`), plus the references the file makes.
- Dockerfiles: multi-stage, non-root, HEALTHCHECK, COPY sources present.
- Every shipped toolgate.toml passes `toolgate check` beside the policies it gets.

Exit 0 when everything holds; otherwise each problem is printed and the exit is 1.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
import kubernetes_validate

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
COMPOSE = DEPLOY / "compose"
KUBE_VERSION = "1.33.0"  # native sidecars are on by default from 1.29, GA in 1.33

problems = []


def check(ok, what):
    if not ok:
        problems.append(what)
    return ok


# --- Kubernetes --------------------------------------------------------------

def render_kustomization(root=K8S):
    k = yaml.safe_load((root / "kustomization.yaml").read_text())
    known = {"apiVersion", "kind", "labels", "resources", "configMapGenerator"}
    check(set(k) <= known, f"kustomization.yaml: keys this check does not render: {set(k) - known}")
    objects = []
    for r in k.get("resources", []):
        path = root / r
        if check(path.is_file(), f"kustomization.yaml: resource {r} missing"):
            objects.extend(o for o in yaml.safe_load_all(path.read_text()) if o)
    for g in k.get("configMapGenerator", []):
        data = {}
        for f in g.get("files", []):
            path = root / f
            if check(path.is_file(), f"configMapGenerator {g['name']}: {f} missing"):
                data[Path(f).name] = path.read_text()
        objects.append({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": g["name"]}, "data": data})
    for pairs in (l.get("pairs", {}) for l in k.get("labels", [])):
        for o in objects:
            o["metadata"].setdefault("labels", {}).update(pairs)
    return objects


def render_with_kubectl(root=K8S):
    """`kubectl kustomize` (kustomize itself) when kubectl is installed, else None."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    out = subprocess.run([kubectl, "kustomize", str(root)], capture_output=True, text=True)
    if not check(out.returncode == 0, f"kubectl kustomize failed: {out.stderr.strip()}"):
        return []
    return [o for o in yaml.safe_load_all(out.stdout) if o]


def same_objects(ours, theirs):
    """What this script renders and what kustomize renders name the same objects
    (kustomize adds a hash to generated ConfigMap names)."""
    def unhashed(o):
        name = o["metadata"]["name"]
        if o["kind"] == "ConfigMap" and name.count("-") >= 1 and len(name.rsplit("-", 1)[1]) == 10:
            return name.rsplit("-", 1)[0]
        return name

    def names(objs):
        return sorted((o["kind"], unhashed(o)) for o in objs)
    check(names(ours) == names(theirs),
          f"kubectl kustomize renders {names(theirs)}, this script {names(ours)}")


def check_scrape(objects):
    dep = next((o for o in objects if o["kind"] == "Deployment"), None)
    if dep is None:
        return
    ann = dep["spec"]["template"]["metadata"].get("annotations", {})
    admin = next((p["containerPort"] for c in dep["spec"]["template"]["spec"].get("initContainers", [])
                  if c["name"] == "toolgate" for p in c.get("ports", []) if p["name"] == "admin"), None)
    check(ann.get("prometheus.io/scrape") == "true", "pod template lacks prometheus.io/scrape: \"true\"")
    check(ann.get("prometheus.io/port") == str(admin),
          f"prometheus.io/port {ann.get('prometheus.io/port')!r} is not the admin port {admin}")
    check(ann.get("prometheus.io/path") == "/metrics", "prometheus.io/path is not /metrics")


def check_dashboard():
    """deploy/grafana/toolgate.json: a Grafana dashboard whose every panel
    queries toolgate's metrics through the templated Prometheus datasource."""
    path = DEPLOY / "grafana" / "toolgate.json"
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        check(False, f"{path}: {e}")
        return
    check(d.get("uid") and d.get("title") and isinstance(d.get("schemaVersion"), int),
          "dashboard lacks uid, title or schemaVersion")
    variables = {v["name"] for v in d.get("templating", {}).get("list", [])}
    check("datasource" in variables, "dashboard has no datasource variable")
    ids = [p.get("id") for p in d.get("panels", [])]
    check(len(ids) == len(set(ids)) and ids, "dashboard panel ids are missing or repeated")
    for p in d.get("panels", []):
        check(p.get("datasource", {}).get("uid") == "${datasource}",
              f"panel {p.get('title')}: not on the datasource variable")
        targets = p.get("targets", [])
        check(targets and all(("toolgate_" in t.get("expr", "") or "gen_ai_" in t.get("expr", ""))
                              for t in targets),
              f"panel {p.get('title')}: a query that reads no toolgate metric")


def validate_schemas(objects):
    for o in objects:
        name = f"{o.get('kind')}/{o.get('metadata', {}).get('name')}"
        try:
            kubernetes_validate.validate(o, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            problems.append(f"{name}: {e.path}: {e.message}")
        except Exception as e:  # noqa: BLE001 - any failure to validate is a problem
            problems.append(f"{name}: cannot validate: {e}")


def check_sidecar(objects):
    by_kind = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    dep = by_kind.get(("Deployment", "agent"))
    if not check(dep is not None, "no Deployment agent"):
        return
    spec = dep["spec"]["template"]["spec"]
    sidecars = [c for c in spec.get("initContainers", []) if c["name"] == "toolgate"]
    if not check(len(sidecars) == 1, "no toolgate init container"):
        return
    tg = sidecars[0]
    check(tg.get("restartPolicy") == "Always", "toolgate is not a native sidecar (restartPolicy: Always)")
    ports = {p["name"]: p["containerPort"] for p in tg.get("ports", [])}
    check(ports.get("admin") == 9090, "toolgate's admin port is not named admin = 9090")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        p = tg.get(probe, {}).get("httpGet", {})
        check(p.get("port") == "admin", f"toolgate {probe} is not on the admin port")
    res = tg.get("resources", {})
    check({"cpu", "memory"} <= set(res.get("requests", {})) and {"cpu", "memory"} <= set(res.get("limits", {})),
          "toolgate lacks cpu/memory requests and limits")
    for c in [tg] + spec.get("containers", []):
        sc = c.get("securityContext", {})
        check(sc.get("readOnlyRootFilesystem") is True, f"{c['name']}: root filesystem not read-only")
        check(sc.get("allowPrivilegeEscalation") is False, f"{c['name']}: privilege escalation allowed")
        check(sc.get("capabilities", {}).get("drop") == ["ALL"], f"{c['name']}: capabilities not all dropped")
        check(sc.get("runAsNonRoot") is True or spec.get("securityContext", {}).get("runAsNonRoot") is True,
              f"{c['name']}: may run as root")
    agents = [c for c in spec.get("containers", []) if c["name"] == "agent"]
    env = {e["name"]: e.get("value") for a in agents for e in a.get("env", [])}
    check(env.get("OPENAI_BASE_URL") == "http://127.0.0.1:8080/v1", "agent's OPENAI_BASE_URL is not toolgate")
    check(not any("secretKeyRef" in str(e) for a in agents for e in a.get("env", [])),
          "the agent container reads a Secret; only toolgate should")
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for m in tg.get("volumeMounts", []):
        cm = volumes.get(m["name"], {}).get("configMap", {}).get("name")
        check(("ConfigMap", cm) in by_kind, f"toolgate mounts {m['name']}, which names no generated ConfigMap")
    for ref in (e["valueFrom"]["secretKeyRef"] for e in tg.get("env", []) if "valueFrom" in e):
        secret = by_kind.get(("Secret", ref["name"]))
        check(secret is not None and ref["key"] in secret.get("stringData", {}),
              f"toolgate reads {ref['name']}/{ref['key']}, which the Secret lacks")
    grace = spec.get("terminationGracePeriodSeconds", 30)
    cfg = next((o for o in objects if o["metadata"]["name"] == "toolgate-config"), None)
    if cfg:
        text = cfg["data"].get("toolgate.toml", "")
        drain = next((int(l.split("=")[1].split("#")[0]) for l in text.splitlines()
                      if l.strip().startswith("drain_secs")), 30)
        check(grace > drain, f"terminationGracePeriodSeconds {grace} <= drain_secs {drain}")
    copy = K8S / "policies" / "00-default.toml"
    check(copy.read_text() == (ROOT / "policies" / "default.toml").read_text(),
          "deploy/kubernetes/policies/00-default.toml differs from policies/default.toml (copy it again)")
    return objects


def check_gateway(objects):
    """deploy/kubernetes/gateway: replicas behind a Service with client
    affinity, their limits shared in Redis, every secret they read present."""
    by_kind = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    dep = by_kind.get(("Deployment", "toolgate"))
    if not check(dep is not None, "gateway: no Deployment toolgate"):
        return
    check(dep["spec"].get("replicas", 1) >= 2, "gateway: fewer than two replicas")
    svc = by_kind.get(("Service", "toolgate"))
    check(svc is not None and svc["spec"].get("sessionAffinity") == "ClientIP",
          "gateway: no Service toolgate with ClientIP affinity")
    check(("Service", "toolgate-redis") in by_kind, "gateway: no Service toolgate-redis")
    cfg = by_kind.get(("ConfigMap", "toolgate-gateway-config"), {}).get("data", {}).get("toolgate.toml", "")
    check('backend = "redis"' in cfg and 'url_env = "TOOLGATE_REDIS_URL"' in cfg,
          "gateway: toolgate.toml does not keep its state in Redis by url_env")
    # Each agent its own token: session approvals (and limits, rules, the
    # audit) are bound to the principal a token names.
    import tomllib
    clients = tomllib.loads(cfg).get("client", []) if cfg else []
    envs = [c.get("token_env") for c in clients]
    check(len(clients) >= 2 and len(set(envs)) == len(envs) and None not in envs,
          "gateway: toolgate.toml does not give each agent its own [[client]] token")
    read = {e["name"] for o in objects if o["kind"] == "Deployment"
            for c in o["spec"]["template"]["spec"].get("containers", []) for e in c.get("env", [])}
    for env in envs:
        check(env in read, f"gateway: the Deployment does not set {env}")
    secrets = {name: o.get("stringData", {}) for (kind, name), o in by_kind.items() if kind == "Secret"}
    for o in objects:
        if o["kind"] != "Deployment":
            continue
        spec = o["spec"]["template"]["spec"]
        for c in spec.get("containers", []):
            sc = c.get("securityContext", {})
            check(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
                  and sc.get("capabilities", {}).get("drop") == ["ALL"],
                  f"gateway: {c['name']} lacks the restricted security context")
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    check(ref["key"] in secrets.get(ref["name"], {}),
                          f"gateway: {c['name']} reads {ref['name']}/{ref['key']}, which the Secret lacks")
        for v in spec.get("volumes", []):
            cm = v.get("configMap", {}).get("name")
            check(cm is None or ("ConfigMap", cm) in by_kind, f"gateway: volume {v['name']} names no generated ConfigMap")
    copy = K8S / "gateway" / "policies" / "00-default.toml"
    check(copy.read_text() == (ROOT / "policies" / "default.toml").read_text(),
          "deploy/kubernetes/gateway/policies/00-default.toml differs from policies/default.toml (copy it again)")


# --- toolgate check on every shipped config -----------------------------------

def toolgate_check(toolgate, config, policies, label):
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        shutil.copy(config, d / "toolgate.toml")
        (d / "policies").mkdir()
        for name, text in policies.items():
            (d / "policies" / name).write_text(text)
        env = dict(os.environ, TOOLGATE_CLIENT_TOKEN="validate-token",
                   TOOLGATE_REDIS_URL="redis://validate:6379/0")
        r = subprocess.run([toolgate, "check", "--config", str(d / "toolgate.toml")],
                           capture_output=True, text=True, env=env)
        check(r.returncode == 0, f"toolgate check {label}: {r.stderr.strip()}")


# --- Compose and Dockerfiles ---------------------------------------------------

def check_compose():
    path = COMPOSE / "docker-compose.yml"
    doc = yaml.safe_load(path.read_text())
    services = doc.get("services", {})
    check({"toolgate", "mock-upstream", "agent"} <= set(services), "compose: services missing")
    replicas = [n for n, svc in services.items() if "replicas" in svc.get("profiles", [])]
    check({"redis", "toolgate-a", "toolgate-b", "front"} <= set(replicas), "compose: the replicas profile is incomplete")
    agent_env = services.get("agent", {}).get("environment", {})
    check(agent_env.get("OPENAI_BASE_URL") == "http://toolgate:8080/v1", "compose: agent not pointed at toolgate")
    vols = services.get("toolgate", {}).get("volumes", [])
    check("../../policies:/etc/toolgate/policies:ro" in vols, "compose: policies/ not mounted into toolgate")
    for name, svc in services.items():
        for v in svc.get("volumes", []):
            src = v.split(":")[0]
            check((COMPOSE / src).exists(), f"compose: {name} mounts missing {src}")
        b = svc.get("build")
        if b:
            ctx = COMPOSE / (b if isinstance(b, str) else b.get("context", "."))
            df = ctx / (b.get("dockerfile", "Dockerfile") if isinstance(b, dict) else "Dockerfile")
            check(df.is_file(), f"compose: {name} builds from missing {df}")
    dc = shutil.which("docker-compose")
    if dc:
        r = subprocess.run([dc, "-f", str(path), "config", "-q"], capture_output=True, text=True,
                           cwd=COMPOSE)
        if check(r.returncode == 0, f"docker-compose config: {r.stderr.strip()}"):
            print("compose: docker-compose config -q passed")
    elif os.environ.get("CI"):
        problems.append("CI must have docker-compose (Debian package) to check the compose file")
    else:
        print("SKIPPED: docker-compose not installed; only the structural compose checks ran")


def check_dockerfile(path, context):
    text = path.read_text().replace("\\\n", " ")  # join continuation lines
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
    rel = path.relative_to(ROOT)
    froms = [l for l in lines if l.upper().startswith("FROM ")]
    users = [l.split()[1] for l in lines if l.upper().startswith("USER ")]
    check(users and users[-1].split(":")[0] not in ("0", "root"), f"{rel}: the final user is root")
    for l in lines:
        if l.upper().startswith("COPY ") and "--from=" not in l:
            for src in l.split()[1:-1]:
                check((context / src).exists(), f"{rel}: COPY source {src} missing")
    return froms, lines


def check_dockerfiles():
    froms, lines = check_dockerfile(DEPLOY / "docker" / "Dockerfile", ROOT)
    check(len(froms) >= 2, "deploy/docker/Dockerfile is not multi-stage")
    hc = [l for l in lines if l.upper().startswith("HEALTHCHECK")]
    check(hc and "health" in hc[0] and "9090" in hc[0], "deploy/docker/Dockerfile: no HEALTHCHECK on the admin port")
    check_dockerfile(COMPOSE / "agent" / "Dockerfile", COMPOSE / "agent")
    def openai_pin(path):
        return [l for l in path.read_text().split() if l.startswith("openai==")]
    pin = openai_pin(COMPOSE / "agent" / "requirements.txt")
    check(pin and pin == openai_pin(ROOT / "tests" / "sdk" / "requirements.txt"),
          "the example agent's openai pin differs from the one the tests use")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--toolgate", required=True)
    a = ap.parse_args()
    objects = render_kustomization()
    rendered = render_with_kubectl()
    if rendered is not None:
        same_objects(objects, rendered)
        validate_schemas(rendered)
        print(f"kubernetes: kubectl kustomize rendered {len(rendered)} objects")
    else:
        print("kubernetes: kubectl not installed; rendered by this script only")
    validate_schemas(objects)
    check_sidecar(objects)
    check_scrape(objects)
    print(f"kubernetes: {len(objects)} objects checked against the {KUBE_VERSION} schemas")
    gateway = render_kustomization(K8S / "gateway")
    rendered = render_with_kubectl(K8S / "gateway")
    if rendered is not None:
        same_objects(gateway, rendered)
        validate_schemas(rendered)
    validate_schemas(gateway)
    check_gateway(gateway)
    print(f"kubernetes gateway: {len(gateway)} objects checked")
    check_dashboard()
    default = (ROOT / "policies" / "default.toml").read_text()
    policies_cm = next((o["data"] for o in objects if o["metadata"]["name"] == "toolgate-policies"), {})
    toolgate_check(a.toolgate, K8S / "config" / "toolgate.toml", policies_cm, "kubernetes config")
    gateway_cm = next((o["data"] for o in gateway if o["metadata"]["name"] == "toolgate-gateway-policies"), {})
    toolgate_check(a.toolgate, K8S / "gateway" / "config" / "toolgate.toml", gateway_cm, "kubernetes gateway config")
    toolgate_check(a.toolgate, DEPLOY / "docker" / "toolgate.toml", {"00-default.toml": default}, "image config")
    repo_policies = {p.name: p.read_text() for p in (ROOT / "policies").glob("*.toml")}
    toolgate_check(a.toolgate, COMPOSE / "toolgate.toml", repo_policies, "compose config")
    toolgate_check(a.toolgate, COMPOSE / "toolgate-replicas.toml", repo_policies, "compose replicas config")
    check_compose()
    check_dockerfiles()
    for p in problems:
        print(f"PROBLEM: {p}")
    if not problems:
        print("deployment files: all checks passed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
