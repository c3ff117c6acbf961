"""The infrastructure templates provision every app setting the code reads, with the code's defaults.

No Terraform or Bicep binary runs here: the Terraform is parsed with python-hcl2, and the few Bicep
constructs the templates use for app settings (a literal list of name/value pairs, module parameters,
`empty(x) ? a : b`, string interpolation, `readEnvironmentVariable` in main.bicepparam) are read by
a small evaluator below. The list of settings is read from ``deltaextras.app.settings.SETTINGS`` at test
time, so a setting added to the code fails these tests until the templates provision it.

What "provisioned" means for a setting of the template's platform:

- its name is an app setting / Lambda environment variable (a connection prefix such as
  DELTAEXTRAS_STORAGE counts through its identity-based ``NAME__...`` keys);
- a required setting comes from a template input without a default (azd environment variable of
  the same name for Bicep, a Terraform variable whose description starts with the setting's name),
  and that input's value is what the app receives;
- a setting with a default deploys exactly the code's default when no input is given (queue names
  included), and is settable through its input (except the poison queue, which the Functions host
  derives as ``<queue>-poison``).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import hcl2
import pytest

from deltaextras.app import settings as settings_module

# checkov depends on its fork bc-python-hcl2, which installs a module of the same name ("hcl2")
# that wraps every value in a list: installed next to python-hcl2 it silently replaces it.
if hcl2.loads('a = "x"\n').get("a") == ["x"]:
    raise ImportError(
        "tests/app/test_infra.py needs python-hcl2, but the 'hcl2' module is checkov's fork bc-python-hcl2: "
        "install checkov in its own virtualenv (see docs/deploy.md)"
    )

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"

# Inputs the infrastructure derives instead of taking from the user.
DERIVED = {
    # The Functions host moves poisoned messages to "<queue>-poison": not independently settable.
    "DELTAEXTRAS_POISON_QUEUE",
}
# Settings the Functions host itself needs (not in deltaextras.app.settings).
AZURE_HOST_SETTINGS = (
    "AzureWebJobsStorage__accountName",
    "AzureWebJobsStorage__credential",
    "AzureWebJobsStorage__clientId",
    "APPLICATIONINSIGHTS_CONNECTION_STRING",
)
# Flex Consumption sets the runtime from functionAppConfig and rejects/ignores these.
FLEX_FORBIDDEN = ("FUNCTIONS_WORKER_RUNTIME", "FUNCTIONS_EXTENSION_VERSION")
SENTINEL = "sentinel-value-for-test"


class Unresolved(str):
    """A value that depends on something only known at deploy time (a resource attribute)."""


class Missing(str):
    """A required input that was not given."""


def platform_settings(settings: Iterable[Any], platform: str) -> list[Any]:
    return [s for s in settings if platform in s.platforms]


def is_provisioned(name: str, keys: Iterable[str]) -> bool:
    keys = set(keys)
    return name in keys or any(k.startswith(name + "__") for k in keys)


# ---------------------------------------------------------------------------------------------
# Terraform (python-hcl2; works with the quoted output of python-hcl2 >= 7 and the older form)
# ---------------------------------------------------------------------------------------------


def _unquote(value: Any) -> Any:
    if isinstance(value, str) and len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        return value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return value


@functools.cache
def _parse_hcl(text: str) -> Any:
    return _normalise(hcl2.loads(text))


def _normalise(node: Any) -> Any:
    if isinstance(node, dict):
        return {_unquote(k): _normalise(v) for k, v in node.items() if not str(k).startswith("__")}
    if isinstance(node, list):
        return [_normalise(v) for v in node]
    return _unquote(node)


@dataclasses.dataclass
class TerraformModule:
    variables: dict[str, dict[str, Any]]
    locals: dict[str, Any]
    resources: dict[tuple[str, str], dict[str, Any]]

    @classmethod
    def load(cls, directory: Path) -> TerraformModule:
        variables: dict[str, dict[str, Any]] = {}
        local_values: dict[str, Any] = {}
        resources: dict[tuple[str, str], dict[str, Any]] = {}
        files = sorted(directory.glob("*.tf"))
        assert files, f"no Terraform files in {directory}"
        for path in files:
            doc = _parse_hcl(path.read_text(encoding="utf-8"))
            for block in doc.get("variable", []):
                variables.update(block)
            for block in doc.get("locals", []):
                local_values.update(block)
            for block in doc.get("resource", []):
                for rtype, named in block.items():
                    for rname, body in named.items():
                        resources[(rtype, rname)] = body
        return cls(variables, local_values, resources)

    def resources_of(self, rtype: str) -> dict[str, dict[str, Any]]:
        return {name: body for (t, name), body in self.resources.items() if t == rtype}

    def input_for(self, setting_name: str) -> str | None:
        """The variable whose description starts with the setting's name ("DELTAEXTRAS_X: ...")."""
        for name, body in self.variables.items():
            description = str(body.get("description", ""))
            if re.match(rf"{re.escape(setting_name)}\b(?!_)", description):
                return name
        return None

    def resolve(self, value: Any, variables: Mapping[str, Any] | None = None, _depth: int = 0) -> Any:
        """Evaluate string templates made of literals and var./local./resource-attribute references."""
        variables = variables or {}
        if _depth > 20:
            raise AssertionError(f"reference loop resolving {value!r}")
        if not isinstance(value, str):
            return value
        parts = _template_parts(value)
        if len(parts) == 1 and isinstance(parts[0], tuple):
            return self._reference(parts[0][0], variables, _depth)
        out = []
        for part in parts:
            if isinstance(part, tuple):
                resolved = self._reference(part[0], variables, _depth)
                if isinstance(resolved, (Unresolved, Missing)):
                    return resolved
                if not isinstance(resolved, (str, int, float)):
                    return Unresolved(value)
                out.append(str(resolved))
            else:
                out.append(part)
        return "".join(out)

    def _reference(self, expression: str, variables: Mapping[str, Any], depth: int) -> Any:
        expression = expression.strip()
        if match := re.fullmatch(r"var\.(\w+)", expression):
            name = match.group(1)
            if name in variables:
                return variables[name]
            if name not in self.variables:
                raise AssertionError(f"undeclared variable var.{name}")
            if "default" not in self.variables[name]:
                return Missing(f"var.{name}")
            return self.resolve(self.variables[name]["default"], variables, depth + 1)
        if match := re.fullmatch(r"local\.(\w+)", expression):
            name = match.group(1)
            if name not in self.locals:
                raise AssertionError(f"undeclared local.{name}")
            return self.resolve(self.locals[name], variables, depth + 1)
        if match := re.fullmatch(r"(\w+)\.(\w+)\.(\w+)", expression):
            body = self.resources.get((match.group(1), match.group(2)))
            if body is not None and match.group(3) in body:
                return self.resolve(body[match.group(3)], variables, depth + 1)
        return Unresolved(expression)


def _template_parts(value: str) -> list[str | tuple[str]]:
    """Split 'a${x}b' into ['a', ('x',), 'b'] (nested braces inside ${...} allowed)."""
    parts: list[str | tuple[str]] = []
    i = 0
    text = []
    while i < len(value):
        if value.startswith("${", i):
            depth, j = 1, i + 2
            while j < len(value) and depth:
                depth += {"{": 1, "}": -1}.get(value[j], 0)
                j += 1
            if text:
                parts.append("".join(text))
                text = []
            parts.append((value[i + 2 : j - 1],))
            i = j
        else:
            text.append(value[i])
            i += 1
    if text or not parts:
        parts.append("".join(text))
    return parts


# ---------------------------------------------------------------------------------------------
# Bicep (only what the templates use for app settings)
# ---------------------------------------------------------------------------------------------


def _strip_comment(line: str) -> str:
    in_string = False
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\" and in_string:
            i += 2
            continue
        if c == "'":
            in_string = not in_string
        elif not in_string and line.startswith("//", i):
            return line[:i]
        i += 1
    return line


def _block(text: str, opening: str) -> str:
    """The body between the bracket that ends `opening` and its matching closing bracket (strings skipped)."""
    start = text.find(opening)
    assert start >= 0, f"{opening!r} not found"
    open_char = opening.rstrip()[-1]
    close_char = {"{": "}", "[": "]"}[open_char]
    i = start + len(opening.rstrip())
    depth, in_string, body_start = 1, False, i
    while depth:
        c = text[i]
        if c == "\\" and in_string:
            i += 2
            continue
        if c == "'":
            in_string = not in_string
        elif not in_string and c == open_char:
            depth += 1
        elif not in_string and c == close_char:
            depth -= 1
        i += 1
    return text[body_start : i - 1]


def _object_entries(body: str) -> dict[str, str]:
    """key: expression pairs of a Bicep object literal whose values fit on one line."""
    entries: dict[str, str] = {}
    depth = 0
    for raw in body.splitlines():
        line = _strip_comment(raw).strip()
        if not line:
            continue
        if depth == 0:
            match = re.fullmatch(r"'?([\w-]+)'?\s*:\s*(.+)", line)
            assert match, f"cannot read object entry: {raw!r}"
            entries[match.group(1)] = match.group(2).strip()
        depth += line.count("{") + line.count("[") - line.count("}") - line.count("]")
    return entries


_TOKEN = re.compile(r"\s*(?:(?P<string>'(?:[^'\\]|\\.)*')|(?P<name>[A-Za-z_]\w*)|(?P<op>[?:().,]))")


class BicepExpression:
    """Recursive-descent evaluator for: 'strings ${expr}', names, a.b, f(x), c ? a : b."""

    def __init__(self, source: str, lookup: Callable[[str], Any]):
        self.tokens = []
        pos = 0
        source = source.strip()
        while pos < len(source):
            match = _TOKEN.match(source, pos)
            if not match:
                raise ValueError(f"cannot read Bicep expression {source!r} at {pos}")
            kind = match.lastgroup
            self.tokens.append((kind, match.group(kind)))
            pos = match.end()
        self.pos = 0
        self.lookup = lookup
        self.source = source

    def evaluate(self) -> Any:
        value = self._ternary()
        if self.pos != len(self.tokens):
            raise ValueError(f"unsupported Bicep expression {self.source!r}")
        return value

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take(self, op: str | None = None) -> tuple[str, str]:
        token = self.tokens[self.pos]
        if op is not None and token != ("op", op):
            raise ValueError(f"expected {op!r} in {self.source!r}")
        self.pos += 1
        return token

    def _ternary(self) -> Any:
        condition = self._primary()
        if self._peek() == ("op", "?"):
            self._take("?")
            yes = self._ternary()
            self._take(":")
            no = self._ternary()
            if isinstance(condition, (Unresolved, Missing)):
                return condition
            return yes if condition else no
        return condition

    def _primary(self) -> Any:
        kind, text = self._take()
        if kind == "string":
            return self._string(text[1:-1])
        if kind != "name":
            raise ValueError(f"unsupported Bicep expression {self.source!r}")
        if self._peek() == ("op", "("):
            self._take("(")
            argument = self._ternary()
            self._take(")")
            if text != "empty":
                return Unresolved(f"{text}(...)")
            if isinstance(argument, (Unresolved, Missing)):
                return argument
            return argument in ("", None) or argument == {} or argument == []
        value = self.lookup(text)
        while self._peek() == ("op", "."):
            self._take(".")
            _, member = self._take()
            if isinstance(value, dict):
                value = value.get(member, Unresolved(f"{text}.{member}"))
            elif not isinstance(value, (Unresolved, Missing)):
                value = Unresolved(f"{text}.{member}")
        return value

    def _string(self, body: str) -> Any:
        out = []
        for part in _template_parts(body):
            if isinstance(part, tuple):
                value = BicepExpression(part[0], self.lookup).evaluate()
                if isinstance(value, (Unresolved, Missing)):
                    return value
                out.append(str(value))
            else:
                out.append(part.replace("\\'", "'"))
        return "".join(out)


@dataclasses.dataclass
class BicepTemplate:
    """infra/bicep: main.bicep + main.bicepparam + the function app module's app settings."""

    main: str
    bicepparam: str
    functionapp: str

    @classmethod
    def load(cls, directory: Path) -> BicepTemplate:
        return cls(
            (directory / "main.bicep").read_text(encoding="utf-8"),
            (directory / "main.bicepparam").read_text(encoding="utf-8"),
            (directory / "modules" / "functionapp.bicep").read_text(encoding="utf-8"),
        )

    def app_settings(self) -> dict[str, str]:
        """name -> value expression of the site's siteConfig.appSettings list."""
        body = "\n".join(_strip_comment(line) for line in _block(self.functionapp, "appSettings: [").splitlines())
        pairs = re.findall(r"name:\s*'([^']+)'\s*\n\s*value:\s*([^\n]+)", body)
        assert len(pairs) == body.count("name:"), "every app setting must be { name: '...' / value: ... } on two lines"
        return {name: value.strip() for name, value in pairs}

    def env_inputs(self) -> dict[str, tuple[str, str | None]]:
        """main.bicep parameter -> (azd environment variable, default or None) from main.bicepparam."""
        inputs = {}
        for line in self.bicepparam.splitlines():
            match = re.fullmatch(
                r"param (\w+) = readEnvironmentVariable\('([^']+)'(?:, '([^']*)')?\)", _strip_comment(line).strip()
            )
            if match:
                inputs[match.group(1)] = (match.group(2), match.group(3))
        return inputs

    def input_for(self, setting_name: str) -> str | None:
        return next((env for env, _ in self.env_inputs().values() if env == setting_name), None)

    def evaluate(self, env: Mapping[str, str]) -> dict[str, Any]:
        """App settings as deployed by `azd up` with this azd environment (resource attributes unresolved)."""
        params: dict[str, str | None] = {}
        for line in self.main.splitlines():
            match = re.fullmatch(r"param (\w+) \w+(?: = (.+))?", _strip_comment(line).strip())
            if match:
                params[match.group(1)] = match.group(2)
        variables: dict[str, str] = {}
        for line in self.main.splitlines():
            match = re.fullmatch(r"var (\w+) = (.+)", _strip_comment(line).strip())
            if match and match.group(2) != "{":
                variables[match.group(1)] = match.group(2)
        objects = {
            match.group(1): _object_entries(_block(self.main, f"var {match.group(1)} = {{"))
            for match in re.finditer(r"^var (\w+) = \{\s*$", self.main, re.M)
        }
        env_inputs = self.env_inputs()

        def main_lookup(name: str) -> Any:
            if name in params:
                if name in env_inputs:
                    env_name, default = env_inputs[name]
                    if env_name in env:
                        return env[env_name]
                    if default is not None:
                        return default
                    return Missing(env_name)
                if params[name] is not None:
                    return BicepExpression(params[name], main_lookup).evaluate()
                return Missing(name)
            if name in objects:
                return {k: BicepExpression(v, main_lookup).evaluate() for k, v in objects[name].items()}
            if name in variables:
                return BicepExpression(variables[name], main_lookup).evaluate()
            return Unresolved(name)

        module_params = _object_entries(
            _block(_block(self.main, "module functionApp 'modules/functionapp.bicep' = {"), "params: {")
        )

        def module_lookup(name: str) -> Any:
            if name in module_params:
                return BicepExpression(module_params[name], main_lookup).evaluate()
            return Unresolved(name)

        return {key: BicepExpression(expr, module_lookup).evaluate() for key, expr in self.app_settings().items()}


# ---------------------------------------------------------------------------------------------
# The checks, shared by the three templates
# ---------------------------------------------------------------------------------------------


def check_settings(
    settings: Iterable[Any],
    platform: str,
    label: str,
    deployed: Callable[[Mapping[str, str]], Mapping[str, Any]],
    input_for: Callable[[str], str | None],
) -> list[str]:
    """Problems with the settings one function receives. `deployed(inputs)` evaluates its app settings
    for the given template inputs (keyed by input name); `input_for(setting)` names the input."""
    problems = []
    relevant = platform_settings(settings, platform)

    def default_mismatch(name: str, deployed_value: Any, default: Any) -> str:
        return f"{label}: {name} deploys {deployed_value!r}, the code's default is {default!r}"

    defaults = deployed({})
    for setting in relevant:
        name = setting.name
        if not is_provisioned(name, defaults):
            problems.append(f"{label}: {name} is not provisioned")
            continue
        settable = setting.required or setting.default is not None
        if not settable or name in DERIVED:
            if name in DERIVED and setting.default is not None and defaults.get(name) != setting.default:
                problems.append(default_mismatch(name, defaults.get(name), setting.default))
            continue
        source = input_for(name)
        if source is None:
            problems.append(f"{label}: {name} has no template input")
            continue
        if setting.required:
            if not isinstance(defaults.get(name), Missing):
                problems.append(f"{label}: required {name} has a default in the template ({defaults.get(name)!r})")
        elif defaults.get(name) != setting.default:
            problems.append(default_mismatch(name, defaults.get(name), setting.default))
        given = deployed({source: SENTINEL})
        if given.get(name) != SENTINEL:
            problems.append(f"{label}: input {source} does not reach {name} (got {given.get(name)!r})")
    if platform == "azure":
        for name in AZURE_HOST_SETTINGS:
            if name not in defaults:
                problems.append(f"{label}: host setting {name} is not provisioned")
        for name in FLEX_FORBIDDEN:
            if name in defaults:
                problems.append(f"{label}: {name} must not be set on Flex Consumption")
    return problems


def bicep_problems(infra: Path, settings: Iterable[Any]) -> list[str]:
    template = BicepTemplate.load(infra / "bicep")
    return check_settings(settings, "azure", "bicep", template.evaluate, template.input_for)


def terraform_azure_site(module: TerraformModule) -> dict[str, Any]:
    """`properties` of the azapi_resource that declares the Microsoft.Web/sites function app."""
    sites = [
        body
        for body in module.resources_of("azapi_resource").values()
        if str(body.get("type", "")).startswith("Microsoft.Web/sites@")
    ]
    assert len(sites) == 1, f"expected one Microsoft.Web/sites azapi_resource, found {len(sites)}"
    return sites[0]["body"]["properties"]


def terraform_azure_settings(module: TerraformModule, variables: Mapping[str, Any]) -> dict[str, Any]:
    items = terraform_azure_site(module)["siteConfig"]["appSettings"]
    return {item["name"]: module.resolve(item["value"], variables) for item in items}


def terraform_azure_problems(infra: Path, settings: Iterable[Any]) -> list[str]:
    module = TerraformModule.load(infra / "terraform" / "azure")
    return check_settings(
        settings, "azure", "terraform/azure", lambda v: terraform_azure_settings(module, v), module.input_for
    )


def terraform_aws_problems(infra: Path, settings: Iterable[Any]) -> list[str]:
    module = TerraformModule.load(infra / "terraform" / "aws")
    functions = module.resources_of("aws_lambda_function")
    assert set(functions) == {"orchestrator", "worker"}, f"unexpected Lambda functions {sorted(functions)}"
    problems = []
    for fname, body in sorted(functions.items()):

        def deployed(variables: Mapping[str, str], body: dict[str, Any] = body, fname: str = fname) -> dict[str, Any]:
            environment = (body.get("environment") or [{}])[0].get("variables", {})
            environment = module.resolve(environment, variables)
            assert isinstance(environment, dict), f"environment of {fname} is not a map: {environment!r}"
            return {k: module.resolve(v, variables) for k, v in environment.items()}

        problems += check_settings(settings, "aws", f"terraform/aws {fname}", deployed, module.input_for)
    return problems


TEMPLATES = {
    "bicep": bicep_problems,
    "terraform-azure": terraform_azure_problems,
    "terraform-aws": terraform_aws_problems,
}


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_templates_provision_every_setting_the_code_reads(template: str) -> None:
    problems = TEMPLATES[template](INFRA, settings_module.SETTINGS)
    assert not problems, "\n".join(["infra/ does not match deltaextras.settings:", *problems])


def test_settings_cover_both_platforms() -> None:
    # Guards the tests above against a SETTINGS tuple that names no platform.
    names = {s.name for s in settings_module.SETTINGS}
    assert {"DELTAEXTRAS_TABLES", "DELTAEXTRAS_QUEUE"} <= names
    assert platform_settings(settings_module.SETTINGS, "azure")
    assert platform_settings(settings_module.SETTINGS, "aws")
    poison = next(s for s in settings_module.SETTINGS if s.name == "DELTAEXTRAS_POISON_QUEUE")
    queue = next(s for s in settings_module.SETTINGS if s.name == "DELTAEXTRAS_QUEUE")
    assert poison.default == queue.default + "-poison", "the Functions host's poison queue is <queue>-poison"


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_check_reports_a_setting_removed_from_the_template(template: str, tmp_path: Path) -> None:
    """Delete the DELTAEXTRAS_TABLES line from a copy of infra/: the check must name the gap."""
    copy = tmp_path / "infra"
    shutil.copytree(INFRA, copy, ignore=shutil.ignore_patterns(".terraform", "*.tfstate*"))
    removed = 0
    for path in [*copy.rglob("*.tf"), *copy.rglob("*.bicep")]:
        text = path.read_text(encoding="utf-8")
        # Terraform map entry or { name = ..., value = ... } item, or a Bicep { name: / value: } item.
        edited = re.sub(r"\n\s*DELTAEXTRAS_TABLES\s*=[^\n]*", "", text)
        edited = re.sub(r'\n\s*\{\s*name\s*=\s*"DELTAEXTRAS_TABLES"[^\n]*', "", edited)
        edited = re.sub(r"\n\s*\{\s*\n\s*name: 'DELTAEXTRAS_TABLES'\s*\n\s*value: [^\n]*\n\s*\}", "", edited)
        if edited != text:
            removed += 1
            path.write_text(edited, encoding="utf-8")
    assert removed, "no DELTAEXTRAS_TABLES line found to remove"
    problems = TEMPLATES[template](copy, settings_module.SETTINGS)
    assert any("DELTAEXTRAS_TABLES is not provisioned" in p for p in problems), problems


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_check_reports_a_new_required_setting(template: str) -> None:
    """A required setting added to (a copy of) SETTINGS is reported until the templates provision it."""
    new = dataclasses.replace(
        settings_module.SETTINGS[0], name="DELTAEXTRAS_SOMETHING_NEW", default=None, required=True
    )
    problems = TEMPLATES[template](INFRA, (*settings_module.SETTINGS, new))
    assert any("DELTAEXTRAS_SOMETHING_NEW is not provisioned" in p for p in problems), problems


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_check_reports_a_queue_name_that_differs_from_the_code(template: str) -> None:
    changed = tuple(
        dataclasses.replace(s, default="renamed-queue") if s.name == "DELTAEXTRAS_QUEUE" else s
        for s in settings_module.SETTINGS
    )
    problems = TEMPLATES[template](INFRA, changed)
    assert any("DELTAEXTRAS_QUEUE deploys 'deltaextras-rorder'" in p for p in problems), problems


def test_check_reports_a_removed_setting_in_parsed_values() -> None:
    """The same gap found on the parsed app settings directly (no file edits)."""
    template = BicepTemplate.load(INFRA / "bicep")
    deployed = template.evaluate({})
    assert is_provisioned("DELTAEXTRAS_TABLES", deployed)
    mutated = {k: v for k, v in deployed.items() if k != "DELTAEXTRAS_TABLES"}
    problems = check_settings(settings_module.SETTINGS, "azure", "bicep", lambda inputs: mutated, template.input_for)
    assert "bicep: DELTAEXTRAS_TABLES is not provisioned" in problems


def test_poison_queue_follows_the_work_queue() -> None:
    bicep = BicepTemplate.load(INFRA / "bicep").evaluate({"DELTAEXTRAS_QUEUE": "q1"})
    assert (bicep["DELTAEXTRAS_QUEUE"], bicep["DELTAEXTRAS_POISON_QUEUE"]) == ("q1", "q1-poison")
    module = TerraformModule.load(INFRA / "terraform" / "azure")
    settings = terraform_azure_settings(module, {"queue_name": "q1"})
    assert (settings["DELTAEXTRAS_QUEUE"], settings["DELTAEXTRAS_POISON_QUEUE"]) == ("q1", "q1-poison")
    queues = {
        name: module.resolve(body["name"], {"queue_name": "q1"})
        for name, body in module.resources_of("azurerm_storage_queue").items()
    }
    assert queues == {"work": "q1", "poison": "q1-poison"}


def test_identity_based_connections() -> None:
    """Queue trigger connection and host storage use the managed identity, never a key."""
    bicep = BicepTemplate.load(INFRA / "bicep").evaluate({})
    module = TerraformModule.load(INFRA / "terraform" / "azure")
    terraform = terraform_azure_settings(module, {})
    for deployed in (bicep, terraform):
        assert deployed["DELTAEXTRAS_STORAGE__credential"] == "managedidentity"
        assert "DELTAEXTRAS_STORAGE__queueServiceUri" in deployed
        assert "DELTAEXTRAS_STORAGE__clientId" in deployed
        assert deployed["AzureWebJobsStorage__credential"] == "managedidentity"
        assert not any("AccountKey" in str(v) or "SharedAccessSignature" in str(v) for v in deployed.values())
    storage = (INFRA / "bicep" / "modules" / "storage.bicep").read_text(encoding="utf-8")
    assert "allowSharedKeyAccess: false" in storage
    (account,) = module.resources_of("azurerm_storage_account").values()
    assert account["shared_access_key_enabled"] is False
    assert terraform_azure_site(module)["functionAppConfig"]["runtime"]["name"] == "python"
    assert re.search(r"runtime: \{\s*name: 'python'", BicepTemplate.load(INFRA / "bicep").functionapp)


def test_lambda_adapter_follows_the_decisions() -> None:
    module = TerraformModule.load(INFRA / "terraform" / "aws")
    functions = module.resources_of("aws_lambda_function")
    for name, body in functions.items():
        assert body["package_type"] == "Image"
        assert module.resolve(body["image_uri"]) == Missing("var.image_uri")
        assert body["image_config"][0]["command"] == [f"lambda_handlers.{name}_handler"]
    (mapping,) = module.resources_of("aws_lambda_event_source_mapping").values()
    assert mapping["batch_size"] == 1
    assert mapping["function_response_types"] == ["ReportBatchItemFailures"]
    queues = module.resources_of("aws_sqs_queue")
    assert module.resolve(queues["work"]["name"]) == settings_module.DEFAULT_QUEUE
    assert "6 * var.worker_timeout_seconds" in queues["work"]["visibility_timeout_seconds"]
    assert "aws_sqs_queue.dlq.arn" in queues["work"]["redrive_policy"]
    assert module.resolve("${var.max_receive_count}") == 5
    aws = "".join(p.read_text(encoding="utf-8") for p in (INFRA / "terraform" / "aws").glob("*.tf"))
    assert '"dynamodb:' not in aws.lower(), "commits use S3 conditional writes: no DynamoDB rights"
    iam = (INFRA / "terraform" / "aws" / "iam.tf").read_text(encoding="utf-8")
    assert '"sqs:SendMessage"' in iam and "aws_sqs_queue.dlq.arn" in iam


def test_required_inputs_are_in_the_examples() -> None:
    """terraform.tfvars.example fills every required variable; main.bicepparam maps every required parameter."""
    for cloud in ("azure", "aws"):
        module = TerraformModule.load(INFRA / "terraform" / cloud)
        required = {name for name, body in module.variables.items() if "default" not in body}
        example = _parse_hcl((INFRA / "terraform" / cloud / "terraform.tfvars.example").read_text(encoding="utf-8"))
        assert required <= set(example), f"{cloud}: {sorted(required - set(example))} missing from the example"
    template = BicepTemplate.load(INFRA / "bicep")
    required_params = set(re.findall(r"^param (\w+) \w+\s*$", template.main, re.M))
    assert required_params <= set(template.env_inputs()), sorted(required_params - set(template.env_inputs()))


def test_azure_yaml_points_at_the_bicep() -> None:
    text = (ROOT / "azure.yaml").read_text(encoding="utf-8")
    assert re.search(r"^\s+path: infra/bicep$", text, re.M)
    assert re.search(r"^\s+module: main$", text, re.M)
    assert re.search(r"^\s+host: function$", text, re.M)
    # azd deploys the service to the resource tagged with its name.
    service = re.search(r"^services:\n  (\w+):", text, re.M).group(1)
    assert f"'azd-service-name': '{service}'" in BicepTemplate.load(INFRA / "bicep").functionapp


def test_azd_outputs_do_not_feed_back_into_inputs() -> None:
    """azd writes main.bicep's outputs into the environment main.bicepparam reads."""
    template = BicepTemplate.load(INFRA / "bicep")
    outputs = set(re.findall(r"^output (\w+) ", template.main, re.M))
    inputs = {env for env, _ in template.env_inputs().values()}
    assert outputs and not outputs & inputs, sorted(outputs & inputs)


def test_deploy_doc_matches_the_templates() -> None:
    """docs/deploy.md names every template input and every skipped checkov check."""
    doc = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    missing = []
    for cloud in ("azure", "aws"):
        module = TerraformModule.load(INFRA / "terraform" / cloud)
        missing += [f"terraform/{cloud} variable {name}" for name in module.variables if f"`{name}`" not in doc]
    template = BicepTemplate.load(INFRA / "bicep")
    azd_managed = {"AZURE_ENV_NAME"}
    missing += [
        f"azd environment value {env}"
        for env, _ in template.env_inputs().values()
        if env not in azd_managed and f"`{env}`" not in doc
    ]
    for path in [*INFRA.rglob("*.tf"), *INFRA.rglob("*.bicep")]:
        for check in re.findall(r"checkov:skip=([A-Z0-9_]+)", path.read_text(encoding="utf-8")):
            if check not in doc:
                missing.append(f"skipped check {check} ({path.relative_to(ROOT)})")
    assert not missing, "docs/deploy.md does not mention:\n" + "\n".join(missing)
