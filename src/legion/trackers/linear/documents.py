"""Every GraphQL document Legion sends to Linear, each one named operation.

Registered with `legion.graphql_client.document`, so the contract test validates each against
Linear's published schema (`tests/contract/schemas/linear.graphql`).

Sizes: Linear rejects a query whose complexity passes 10,000 points (a connection multiplies
its nodes' cost by `first`), so a page of 100 issues carries at most 25 labels, 25 sub-issues,
10 pull request attachments and 10 relations pointing at it each (about 9,000 points).
"""

from __future__ import annotations

from legion.graphql_client import document
from legion.trackers.graphql import CommentEdit

ISSUE_PAGE_SIZE = 100
NESTED_PAGE_SIZE = 25  # an issue's labels and sub-issues read with it
ATTACHMENT_PAGE_SIZE = 10  # an issue's pull request attachments read with it
RELATION_PAGE_SIZE = 10  # the relations pointing at an issue read with it ("blocks" among them)
COMMENT_PAGE_SIZE = 100
LABEL_PAGE_SIZE = 250  # Linear's largest page
STATE_PAGE_SIZE = 250

# What Legion reads of an issue, everywhere it reads one. Its attachments are filtered on the
# server to pull requests' pages, so a Slack thread or a Sentry issue takes no PR's place.
_ISSUE_FIELDS = f"""
fragment LegionIssue on Issue {{
  id
  identifier
  number
  title
  description
  url
  createdAt
  updatedAt
  team {{ id key }}
  state {{ id name type }}
  labels(first: {NESTED_PAGE_SIZE}) {{ nodes {{ id name }} }}
  parent {{ identifier }}
  children(first: {NESTED_PAGE_SIZE}) {{ nodes {{ identifier }} }}
  attachments(first: {ATTACHMENT_PAGE_SIZE}, filter: {{ url: {{ contains: "/pull/" }} }}) {{
    nodes {{ url }}
  }}
  inverseRelations(first: {RELATION_PAGE_SIZE}) {{ nodes {{ id type issue {{ id identifier }} }} }}
}}
"""

_COMMENT_FIELDS = """
fragment LegionComment on Comment {
  id
  body
  createdAt
  user { id name displayName isMe guest }
  botActor { name }
  externalUser { name }
}
"""

VIEWER = document(
    "linear",
    """
query LinearViewer {
  viewer { id name displayName }
}
""",
)

# The team by its key, with its workflow states (a team has a handful, never 250).
TEAM = document(
    "linear",
    f"""
query LinearTeam($key: String!) {{
  teams(first: 2, filter: {{ key: {{ eq: $key }} }}) {{
    nodes {{
      id
      key
      name
      states(first: {STATE_PAGE_SIZE}) {{ nodes {{ id name type position }} }}
    }}
  }}
}}
""",
)

# The labels an issue of the team can carry: the team's own and the workspace's.
LABELS = document(
    "linear",
    f"""
query LinearLabels($teamId: ID!, $after: String) {{
  issueLabels(
    first: {LABEL_PAGE_SIZE}
    after: $after
    filter: {{ or: [{{ team: {{ id: {{ eq: $teamId }} }} }}, {{ team: {{ null: true }} }}] }}
  ) {{
    nodes {{ id name isGroup team {{ id }} }}
    pageInfo {{ hasNextPage endCursor }}
  }}
}}
""",
)

ISSUES = document(
    "linear",
    f"""
query LinearIssues($filter: IssueFilter!, $after: String) {{
  issues(first: {ISSUE_PAGE_SIZE}, after: $after, filter: $filter) {{
    nodes {{ ...LegionIssue }}
    pageInfo {{ hasNextPage endCursor }}
  }}
}}
{_ISSUE_FIELDS}
""",
)

# `issue(id:)` takes the UUID or the identifier (ENG-12).
ISSUE = document(
    "linear",
    f"""
query LinearIssue($id: String!) {{
  issue(id: $id) {{ ...LegionIssue }}
}}
{_ISSUE_FIELDS}
""",
)

COMMENTS = document(
    "linear",
    f"""
query LinearComments(
  $id: String!, $first: Int, $after: String, $last: Int, $before: String
) {{
  issue(id: $id) {{
    identifier
    team {{ key }}
    comments(first: $first, after: $after, last: $last, before: $before) {{
      nodes {{ ...LegionComment }}
      pageInfo {{ hasNextPage endCursor hasPreviousPage startCursor }}
    }}
  }}
}}
{_COMMENT_FIELDS}
""",
)

# A comment by its id: how a create whose answer was lost is found again.
COMMENT = document(
    "linear",
    f"""
query LinearComment($id: String!) {{
  comment(id: $id) {{ ...LegionComment issue {{ identifier }} }}
}}
{_COMMENT_FIELDS}
""",
)

ISSUE_CREATE = document(
    "linear",
    f"""
mutation LinearIssueCreate($input: IssueCreateInput!) {{
  issueCreate(input: $input) {{
    success
    issue {{ ...LegionIssue }}
  }}
}}
{_ISSUE_FIELDS}
""",
)

# Status and labels: `addedLabelIds`/`removedLabelIds` change only those labels, so a label a
# person set meanwhile is never clobbered (as a whole `labelIds` list would).
ISSUE_UPDATE = document(
    "linear",
    f"""
mutation LinearIssueUpdate($id: String!, $input: IssueUpdateInput!) {{
  issueUpdate(id: $id, input: $input) {{
    success
    issue {{ ...LegionIssue }}
  }}
}}
{_ISSUE_FIELDS}
""",
)

LABEL_CREATE = document(
    "linear",
    """
mutation LinearLabelCreate($input: IssueLabelCreateInput!) {
  issueLabelCreate(input: $input) {
    success
    issueLabel { id name isGroup team { id } }
  }
}
""",
)

COMMENT_CREATE = document(
    "linear",
    f"""
mutation LinearCommentCreate($input: CommentCreateInput!) {{
  commentCreate(input: $input) {{
    success
    comment {{ ...LegionComment issue {{ identifier }} }}
  }}
}}
{_COMMENT_FIELDS}
""",
)

# Legion's own comment edited in place (a worker's task list).
COMMENT_UPDATE = document(
    "linear",
    f"""
mutation LinearCommentUpdate($id: String!, $input: CommentUpdateInput!) {{
  commentUpdate(id: $id, input: $input) {{
    success
    comment {{ ...LegionComment issue {{ identifier }} }}
  }}
}}
{_COMMENT_FIELDS}
""",
)

# How Legion edits its own comment: read, checked, then updated (`graphql.edit_legions_comment`).
COMMENT_EDIT = CommentEdit(
    "linear",
    COMMENT,
    "comment",
    COMMENT_UPDATE,
    ("commentUpdate", "comment"),
    "identifier",
    lambda comment_id, body: {"id": comment_id, "input": {"body": body}},
)

# "Blocked by": a relation of type `blocks` whose `issue` is the blocker and whose
# `relatedIssue` the issue that waits (read from the waiting issue's `inverseRelations`).
# The id is Legion's, so a create whose answer was lost is refused, not made twice.
RELATION_CREATE = document(
    "linear",
    """
mutation LinearIssueRelationCreate($input: IssueRelationCreateInput!) {
  issueRelationCreate(input: $input) {
    success
    issueRelation { id type issue { identifier } relatedIssue { identifier } }
  }
}
""",
)

RELATION_DELETE = document(
    "linear",
    """
mutation LinearIssueRelationDelete($id: String!) {
  issueRelationDelete(id: $id) { success }
}
""",
)
