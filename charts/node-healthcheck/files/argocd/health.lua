-- Argo CD health check of remediation.medik8s.io/v1alpha1 NodeHealthCheck (node-healthcheck).
-- Argo CD runs it with the live object in obj and without Lua's string library; docs/gitops.md
-- says how to install it (argocd-cm, resource.customizations.health.remediation.medik8s.io_NodeHealthCheck).
--
--   no status yet, or status.observedGeneration below metadata.generation  Progressing
--   condition Disabled True (phase Disabled)                                 Degraded
--   phase Paused (spec.pauseRequests, or an upgrade holds remediation)       Suspended
--   phase Remediating (a node has a running remediation)                     Progressing
--   phase Enabled                                                            Healthy
--   any other phase                                                          Unknown
-- The public operator writes no observedGeneration: its status is read by phase alone.
local hs = {}

local function condition(status, conditionType)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == conditionType then
      return c
    end
  end
  return nil
end

local status = obj.status
if status == nil or status.phase == nil or status.phase == "" then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator's first status"
  return hs
end

local generation = obj.metadata.generation
if status.observedGeneration ~= nil and generation ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to evaluate generation " .. tostring(generation) ..
    " (the status is of generation " .. tostring(status.observedGeneration) .. ")"
  return hs
end

local disabled = condition(status, "Disabled")
if disabled ~= nil and disabled.status == "True" then
  hs.status = "Degraded"
  hs.message = "Disabled: " .. tostring(disabled.reason)
  if disabled.message ~= nil and disabled.message ~= "" then
    hs.message = hs.message .. ": " .. disabled.message
  end
  return hs
end

local byPhase = {Disabled = "Degraded", Paused = "Suspended", Remediating = "Progressing", Enabled = "Healthy"}
hs.status = byPhase[status.phase]
if hs.status == nil then
  hs.status = "Unknown"
  hs.message = "Unknown phase " .. tostring(status.phase)
  return hs
end
hs.message = status.reason
if hs.message == nil then
  hs.message = ""
end
return hs
